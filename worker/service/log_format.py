"""The worker's log format: ``text`` (Celery's) or ``json`` (one JSON object a line).

``SBX_LOG_FORMAT`` (``Settings.log_format``) selects it; ``sbx worker --json`` sets it.
With ``json`` every line the worker writes to its log is one JSON object with at
least ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``message`` (plus ``exc``
for a traceback). What Celery would print around its logs is left out (its start-up
banner) or logged instead (warnings, the shutdown notices of SIGTERM and Ctrl+C).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_init,
    worker_ready,
    worker_shutting_down,
)

from worker.settings import Settings


class JsonLineFormatter(logging.Formatter):
    """A log record as one line of JSON (newlines inside values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _json_handlers(logger: logging.Logger | None = None, **_: Any) -> None:
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


def install_log_format(settings: Settings) -> None:
    """Apply ``settings.log_format`` to this process's logs, now and once Celery sets
    up its loggers. ``text`` changes nothing."""
    if settings.log_format != "json":
        return
    _json_handlers(logging.getLogger())
    logging.captureWarnings(True)  # Celery warns before it sets up its loggers
    after_setup_logger.connect(_json_handlers, weak=False)
    after_setup_task_logger.connect(_json_handlers, weak=False)
    celeryd_init.connect(_no_banner, weak=False)
    worker_ready.connect(_quiet_signal_handlers, weak=False)
    worker_shutting_down.connect(_log_shutdown, weak=False)
