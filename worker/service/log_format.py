"""The worker's logs: ``text`` (Celery's) or ``json`` (one JSON object a line), never a payload.

``SBX_LOG_FORMAT`` (``Settings.log_format``) selects the format; ``sbx worker --json``
sets it. With ``json`` every line the worker writes to its log is one JSON object:
``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``worker`` (``host:pid``), ``call_id``
and ``session`` (set while a call runs; ``session`` is :func:`session_digest` of the
session id, never the id), ``message``, and ``exc`` for a traceback. What Celery would
print around its logs is left out (its start-up banner) or logged instead (warnings,
the shutdown notices of SIGTERM and Ctrl+C).

In both formats no command, output or secret reaches a log line
(:class:`PayloadFilter`): Celery's records that carry a task's arguments or return value
are dropped at every level, every message and traceback passes through the redactor,
and at ``DEBUG`` the backends' client libraries (:data:`TRANSPORT_LOGGERS`) stay at
``INFO`` (their debug lines carry request URLs and bodies).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_ready,
    worker_shutting_down,
)

from process_registry.redact import redact_text
from worker.service.runtime import worker_identity
from worker.settings import Settings

TRANSPORT_LOGGERS = (
    "urllib3", "docker", "asyncssh", "httpx", "httpcore", "grpc", "hpack", "h2", "websockets",
    "modal", "daytona", "daytona_sdk", "vercel", "paramiko",
)  # fmt: skip
"""Libraries that stay at INFO when the worker logs at DEBUG."""

_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("sbx_call_id", default=None)
_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("sbx_session", default=None)


def session_digest(session_id: str) -> str:
    """How logs name a session: the first 16 hex digits of its SHA-256.

    Operators find a session's lines with ``printf %s "$SID" | sha256sum | cut -c1-16``.
    """
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class PayloadFilter(logging.Filter):
    """Drops Celery's records that carry task arguments or results; redacts the rest.

    The message is rendered and redacted once here, so every handler and format
    writes the same clean text.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if _carries_payload(record):
            return False
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep its template only
            message = str(record.msg)
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        record.exc_info = None  # the redacted text above stands for it
        return True


def _carries_payload(record: logging.LogRecord) -> bool:
    if record.name == "celery.app.trace" and record.levelno < logging.WARNING:
        return True  # "Task ... succeeded in ...: <return value>" with its arguments
    template = record.msg if isinstance(record.msg, str) else ""
    return template.startswith("TaskPool: Apply")  # celery.pool debug: the message body


class JsonLineFormatter(logging.Formatter):
    """A log record as one line of JSON (newlines inside values are escaped)."""

    def __init__(self, worker_id: str | None = None) -> None:
        super().__init__()
        self.worker_id = worker_id or worker_identity()

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "worker": self.worker_id,
            "call_id": _call_id.get(),
            "session": _session.get(),
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def _filter_handlers(logger: logging.Logger | None = None, **_: Any) -> None:
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, PayloadFilter) for f in handler.filters):
            handler.addFilter(PayloadFilter())


def _json_handlers(logger: logging.Logger | None = None, **_: Any) -> None:
    _filter_handlers(logger)
    for handler in (logger or logging.getLogger()).handlers:
        handler.setFormatter(JsonLineFormatter())


def _no_banner(instance: Any = None, **_: Any) -> None:
    if instance is not None:
        instance.quiet = True  # the banner is many lines of text, not a log record


def _quiet_signal_handlers(sender: Any = None, **_: Any) -> None:
    """Celery's SIGTERM/SIGINT handlers write their notices straight to stdout; these
    are the same handlers without the notice (logged by :func:`_log_shutdown`)."""
    worker = getattr(sender, "controller", None)  # sender: the consumer
    if worker is None or threading.current_thread() is not threading.main_thread():
        return
    from celery.apps import worker as celery_worker

    def second_ctrl_c(w: Any) -> None:
        celery_worker.install_worker_term_hard_handler(w, sig="SIGINT", verbose=False)

    celery_worker.install_worker_term_handler(worker, verbose=False)
    celery_worker.install_worker_int_handler(worker, callback=second_ctrl_c, verbose=False)


def _log_shutdown(sig: str = "", how: str = "", **_: Any) -> None:
    logging.getLogger("worker.service.runner").info("%s shutdown on %s", how.lower(), sig)


def _task_started(task_id: str | None = None, args: Any = None, **_: Any) -> None:
    """The call's context for the records logged while it runs (and on the dispatcher's
    runner, which runs it in a copy of this context)."""
    _call_id.set(task_id)
    message = args[0] if isinstance(args, list | tuple) and args else None
    sid = message.get("session_id") if isinstance(message, dict) else None
    _session.set(session_digest(sid) if isinstance(sid, str) else None)


def _task_ended(**_: Any) -> None:
    _call_id.set(None)
    _session.set(None)


def install_log_format(settings: Settings, loglevel: str = "INFO") -> None:
    """Apply ``settings.log_format`` and the payload filter to this process's logs, now
    and once Celery sets up its loggers (``loglevel``: the worker's level)."""
    level = logging.getLevelName(loglevel.upper())
    if isinstance(level, int):
        for name in TRANSPORT_LOGGERS:
            # Their DEBUG lines carry request URLs and bodies (container names, commands).
            logging.getLogger(name).setLevel(max(logging.INFO, level))
    task_prerun.connect(_task_started, weak=False)
    task_postrun.connect(_task_ended, weak=False)
    if settings.log_format != "json":
        _filter_handlers(logging.getLogger())
        after_setup_logger.connect(_filter_handlers, weak=False)
        after_setup_task_logger.connect(_filter_handlers, weak=False)
        return
    _json_handlers(logging.getLogger())
    logging.captureWarnings(True)  # Celery warns before it sets up its loggers
    after_setup_logger.connect(_json_handlers, weak=False)
    after_setup_task_logger.connect(_json_handlers, weak=False)
    celeryd_init.connect(_no_banner, weak=False)
    worker_ready.connect(_quiet_signal_handlers, weak=False)
    worker_shutting_down.connect(_log_shutdown, weak=False)
