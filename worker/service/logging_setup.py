"""The worker's logs: text (the default) or one JSON object per line, from sbx and Celery alike.

Contract:

* :func:`configure_logging` owns the process's logging: Celery's own logging
  setup is skipped (its ``setup_logging`` signal has a receiver), so sbx's and
  Celery's records go through one handler on stderr.
* ``SBX_LOG_FORMAT=json`` writes ``{"time", "level", "logger", "worker", "call_id",
  "session", "message"}`` (plus ``"exc"`` for an exception) per line. ``session``
  is :func:`session_digest` of the session id, never the id itself; ``call_id`` and
  ``session`` are set while a task runs (Celery's ``task_prerun``/``task_postrun``).
* No command, output or secret reaches a log line: the records Celery writes with
  a task's arguments or return value (its trace "succeeded" line and the pool's
  debug "Apply" line, which carry commands, tokens and output) are dropped at
  every level, and every message (and traceback) passes through the redactor.
  At ``DEBUG``, client libraries of the backends (:data:`TRANSPORT_LOGGERS`) stay at
  ``INFO``: their debug lines carry request URLs and bodies.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import sys
import time
from typing import Any

from celery.signals import setup_logging, task_postrun, task_prerun

from process_registry.redact import redact_text

TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""The text format (the CLI's own, kept for ``sbx worker``)."""

TRANSPORT_LOGGERS = (
    "urllib3", "docker", "asyncssh", "httpx", "httpcore", "grpc", "hpack", "h2", "websockets",
    "modal", "daytona", "daytona_sdk", "vercel", "paramiko",
)  # fmt: skip
"""Libraries that stay at INFO when the worker logs at DEBUG (see configure_logging)."""

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


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def __init__(self, worker_id: str) -> None:
        super().__init__()
        self.worker_id = worker_id

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": _iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "worker": self.worker_id,
            "call_id": _call_id.get(),
            "session": _session.get(),
            "message": record.getMessage(),
        }
        if record.exc_text:
            payload["exc"] = record.exc_text
        return json.dumps(payload, ensure_ascii=False, default=str)


def _iso_time(created: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{whole}.{int((created % 1) * 1000):03d}Z"


def configure_logging(log_format: str, loglevel: str, worker_id: str) -> list[str]:
    """Send every record of this process to stderr in ``log_format`` (``text``/``json``)
    at ``loglevel`` and up, through :class:`PayloadFilter`; idempotent.

    Returns the options for Celery's command line that go with it: with ``json``,
    ``--quiet`` (no start-up banner on stdout) and Python warnings become records.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(PayloadFilter())
    if log_format == "json":
        handler.setFormatter(JsonFormatter(worker_id))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(loglevel.upper())
    for name in TRANSPORT_LOGGERS:
        # Their DEBUG lines carry request URLs and bodies (container names, commands).
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
    # Celery configures logging only when nobody answers this signal.
    setup_logging.connect(_celery_leaves_logging_to_us, weak=False)
    task_prerun.connect(_task_started, weak=False)
    task_postrun.connect(_task_ended, weak=False)
    if log_format != "json":
        return []
    logging.captureWarnings(True)
    return ["--quiet"]


def _celery_leaves_logging_to_us(**_: Any) -> None:
    """Receiver of Celery's ``setup_logging``: its presence is what matters."""


def _task_started(task_id: str | None = None, args: Any = None, **_: Any) -> None:
    _call_id.set(task_id)
    message = args[0] if isinstance(args, list | tuple) and args else None
    sid = message.get("session_id") if isinstance(message, dict) else None
    _session.set(session_digest(sid) if isinstance(sid, str) else None)


def _task_ended(**_: Any) -> None:
    _call_id.set(None)
    _session.set(None)
