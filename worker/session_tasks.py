"""``sbx.session_op``: receipt and session operations, run on a worker.

Receipts live under the worker's ``SBX_HOME`` and only a verified session may
read them, so clients and the CLI ask a worker: the task verifies the
session token exactly as ``execute_call`` does, then runs the operation
through the worker's :class:`~worker.processes.ProcessService`. The result is
always a JSON string: ``{"error", "status"}`` on failure (``denied`` for a
missing or wrong token, with nothing protected in it).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from pydantic import ValidationError

from process_registry.sessions import InvalidSessionId, validate_session_id
from registry.results import to_json, tool_error

from .process_messages import SessionOpMessage
from .processes import ProcessService, install_process_service
from .services import Services
from .tasks import answer_in_mailbox

log = logging.getLogger(__name__)

SESSION_OP_TASK = "sbx.session_op"


def execute_session_op(raw: Any, svc: Services) -> str:
    """Verify the caller and run one :class:`SessionOpMessage`; always a JSON string."""
    try:
        message = SessionOpMessage.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        return tool_error(f"malformed session operation: {problems}", status="invalid")
    try:
        validate_session_id(message.session_id)
    except InvalidSessionId as exc:
        return tool_error(str(exc), status="denied")
    if not svc.signer.verify(message.session_id, message.session_token):
        return tool_error("session token missing or invalid for this session", status="denied")
    service = svc.extras.get("processes")
    if not isinstance(service, ProcessService):
        service = install_process_service(svc, svc.settings)
    try:
        result = service.session_op(
            message.op,
            message.session_id,
            process_id=message.process_id,
            child_id=message.child_id,
        )
    except Exception as exc:  # the contract: a JSON answer, never a traceback
        log.exception("session operation %s failed", message.op)
        return tool_error(f"session operation failed: {type(exc).__name__}: {exc}")
    return to_json(result)


def register_session_tasks(app: Celery) -> None:
    """Add ``sbx.session_op`` to ``app`` (call next to ``register_tasks``)."""

    @app.task(name=SESSION_OP_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def session_op(self: Task, message: dict[str, Any]) -> str:
        return answer_in_mailbox(str(self.request.id), execute_session_op, message)
