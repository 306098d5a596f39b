"""Celery tasks: thin wrappers that claim a call, keep it alive and run it."""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery, Task
from celery.exceptions import Ignore

from .app import APPROVAL_TASK, PING_TASK, TOOL_CALL_TASK
from .approvals import execute_approval
from .calls import cancelled_before_start, execute_call
from .liveness import CANCELLED, DUPLICATE
from .services import Services, services


def run_claimed(call_id: str, message: Any, svc: Services) -> str:
    """Run ``message`` unless ``call_id`` was claimed before (then raise ``Ignore``).

    The result goes to the call's mailbox (:meth:`CallLedger.deliver`), where the
    client waits for it; it is also returned, for Celery's logs only.
    """
    ledger = svc.ledger
    claim = ledger.claim(call_id, svc.worker_id)
    if claim == DUPLICATE:
        # A redelivery: the first delivery runs (or ran) it and delivers the result.
        raise Ignore()
    if claim == CANCELLED:
        result = cancelled_before_start(call_id)
        ledger.deliver(call_id, result)
        return result
    cancel = threading.Event()
    heartbeat = svc.heartbeat
    heartbeat.add(call_id, cancel)
    try:
        result = execute_call(message, svc, cancel=cancel)
        ledger.deliver(call_id, result)
        return result
    finally:
        heartbeat.finish(call_id)


def register_tasks(app: Celery) -> None:
    """Add sbx's tasks to ``app``."""

    # Results travel through the call's mailbox, not Celery's result backend.
    @app.task(name=TOOL_CALL_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def tool_call(self: Task, message: dict[str, Any]) -> str:
        return run_claimed(str(self.request.id), message, services())

    @app.task(name=APPROVAL_TASK)  # type: ignore[untyped-decorator]
    def approval(message: dict[str, Any]) -> str:
        return execute_approval(message, services())

    @app.task(name=PING_TASK)  # type: ignore[untyped-decorator]
    def ping() -> str:
        return "pong"
