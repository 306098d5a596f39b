"""``sbx.receipt_op``: receipt and continuation operations, run on a worker.

Receipts live under the worker's ``SBX_HOME`` and only a verified session may
read them, so clients and the CLI ask a worker: the task verifies the
session's proof exactly as ``execute_call`` does (``continue`` also the
child session's: its consent), then runs the operation
on the worker's process table (:func:`receipt_op`). The result is
always a JSON string: ``{"error", "status"}`` on failure (``denied`` for a
missing or wrong token, with nothing protected in it).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task

from process_registry.models import NotFound, PermissionDenied, ProcessTableError
from process_registry.table import ProcessTable
from process_registry.tokens.formats import InvalidSessionId, validate_session_id
from registry.results import to_json, tool_error
from worker.protocol.process_messages import ReceiptOpMessage
from worker.protocol.tasks import RECEIPT_OP_TASK
from worker.service.auth import session_token_of, verified_message
from worker.service.boundary import CallerDenied, error_fields, error_result
from worker.service.process_wiring import install_process_manager
from worker.service.processes import ProcessManager, unknown_process
from worker.service.runtime import WorkerRuntime
from worker.service.tasks import answer_in_mailbox

log = logging.getLogger(__name__)


def receipt_op(table: ProcessTable, op: str, session_id: str, **kw: Any) -> dict[str, Any]:
    """Receipt and session operations for the verified ``session_id``.

    ``receipts_list`` -> ``{"receipts": [...]}``; ``receipt_show``
    (``process_id``) -> ``{"receipt": {...}}``; ``receipts_verify`` ->
    ``{"problems": [...], "sessions": [...]}`` over every session whose
    receipts the caller may read; ``receipts_prune`` -> ``{"pruned": n}``;
    ``continue`` (``child_id``) records that the child continues the
    caller (the caller proved it holds the parent's token) ->
    ``{"parent", "child"}``. Failures as in the module docstring.
    """
    store = table.receipts
    try:
        validate_session_id(session_id)
        if op == "receipts_list":
            return {"receipts": [r.model_dump(mode="json") for r in store.list(session_id)]}
        if op == "receipt_show":
            process_id = str(kw.get("process_id") or "")
            try:
                receipt = store.read(process_id, session_id)
            except (PermissionDenied, NotFound):
                return unknown_process(process_id)
            return {"receipt": receipt.model_dump(mode="json")}
        if op == "receipts_verify":
            sessions = store.sessions_readable_by(session_id)
            return {"problems": store.verify(sessions), "sessions": sessions}
        if op == "receipts_prune":
            return {"pruned": store.prune()}
        if op == "continue":
            child = validate_session_id(str(kw.get("child_id") or ""))
            table.continuations.record(session_id, child)
            return {"parent": session_id, "child": child}
    except (ProcessTableError, InvalidSessionId) as exc:
        return error_fields(exc)
    return {"error": f"unknown session operation {op!r}", "status": "invalid"}


def execute_receipt_op(raw: Any, svc: WorkerRuntime) -> str:
    """Verify the caller and run one :class:`ReceiptOpMessage`; always a JSON string."""
    message = verified_message(ReceiptOpMessage, raw, svc, "receipt-op", "session operation")
    if isinstance(message, str):
        return message
    if message.op == "continue":
        try:  # the child session's consent, over the same message
            session_token_of(svc, "receipt-op", message, str(message.child_id or ""),
                             message.child_proof)  # fmt: skip
        except CallerDenied as exc:
            return error_result(exc)
    service = svc.components.get("processes")
    if not isinstance(service, ProcessManager):
        service = install_process_manager(svc, svc.settings)
    try:
        result = receipt_op(
            service.table,
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
    def receipt_op_task(self: Task, message: dict[str, Any]) -> str:
        return answer_in_mailbox(str(self.request.id), execute_receipt_op, message)
