"""``sbx.receipt_op``: receipt and continuation operations, run on a worker.

Receipts live under the worker's ``SBX_HOME`` and only a verified session may
read them, so clients and the CLI ask a worker: the task verifies the
session token exactly as ``execute_call`` does, then runs the operation
through the worker's :class:`~worker.processes.ProcessManager`. The result is
always a JSON string: ``{"error", "status"}`` on failure (``denied`` for a
missing or wrong token, with nothing protected in it).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task

from registry.results import to_json, tool_error
from worker.protocol.process_messages import ReceiptOpMessage
from worker.protocol.tasks import RECEIPT_OP_TASK
from worker.service.boundary import verified_message
from worker.service.processes import ProcessManager, install_process_manager
from worker.service.runtime import WorkerRuntime
from worker.service.tasks import answer_in_mailbox

log = logging.getLogger(__name__)



def execute_receipt_op(raw: Any, svc: WorkerRuntime) -> str:
    """Verify the caller and run one :class:`ReceiptOpMessage`; always a JSON string."""
    message = verified_message(ReceiptOpMessage, raw, svc.signer, "session operation")
    if isinstance(message, str):
        return message
    service = svc.components.get("processes")
    if not isinstance(service, ProcessManager):
        service = install_process_manager(svc, svc.settings)
    try:
        result = service.receipt_op(
            message.op,
            message.session_id,
            process_id=message.process_id,
            child_id=message.child_id,
        )
    except Exception as exc:  # the contract: a JSON answer, never a traceback
        log.exception("session operation %s failed", message.op)
        return tool_error(f"session operation failed: {type(exc).__name__}: {exc}")
    return to_json(result)


def register_receipt_tasks(app: Celery) -> None:
    """Add ``sbx.receipt_op`` to ``app`` (call next to ``register_tasks``)."""

    @app.task(name=RECEIPT_OP_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def receipt_op(self: Task, message: dict[str, Any]) -> str:
        return answer_in_mailbox(str(self.request.id), execute_receipt_op, message)
