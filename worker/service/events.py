"""Celery task events (``sbx worker --events`` / ``SBX_EVENTS``) for Flower and celery-exporter.

Contract: a worker with events on sends Celery's task events and worker heartbeats,
so Flower and exporters see its tasks (name, id, state, timing, worker). Task
events never carry a call's arguments, result or output: every worker's event
dispatcher (:class:`PayloadFreeDispatcher`, events on or off) replaces them,
and redacts exception texts. Results travel only through the ledger.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.app.events import Events
from celery.events.dispatcher import EventDispatcher

from process_registry.redact import redact_text

KEPT_OUT = "[kept out of events]"
"""What a task event says instead of the arguments or result a call carried."""

_PAYLOAD_FIELDS = ("args", "kwargs", "result")
_REDACTED_FIELDS = ("exception", "traceback")


class PayloadFreeDispatcher(EventDispatcher):  # type: ignore[misc]
    """Celery's event dispatcher, minus the task payloads (see the module docstring)."""

    def send(self, type: str, *args: Any, **fields: Any) -> Any:
        if type.startswith("task-"):
            for key in _PAYLOAD_FIELDS:
                if key in fields:
                    fields[key] = KEPT_OUT
            for key in _REDACTED_FIELDS:
                if isinstance(fields.get(key), str):
                    fields[key] = redact_text(fields[key])
        return super().send(type, *args, **fields)


class PayloadFreeEvents(Events):  # type: ignore[misc]
    dispatcher_cls = "worker.service.events:PayloadFreeDispatcher"


def configure_events(app: Celery, send: bool) -> list[str]:
    """Make ``app``'s events payload-free and, when ``send``, turn task events on.

    Returns the worker options that go with it: with events on, Celery's worker
    heartbeat stays on too (Flower shows a worker without one as offline).
    Call before the app's events are first used.
    """
    app.events_cls = "worker.service.events:PayloadFreeEvents"
    if not send:
        return ["--without-heartbeat"]
    app.conf.worker_send_task_events = True
    return []
