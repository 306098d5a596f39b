"""Answering approvals: the platform's user approves or denies a refused command.

Only the session that was refused may answer (its proof is verified), an
approval also needs the platform's approver credential (a session token, which
the session's own sandbox might obtain, or the approval id alone grants
nothing), and the answer goes to the worker's
:class:`~registry.approval.ApprovalGuard`, whose store every worker shares.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from registry.approval import (
    ApprovalAlreadyResolvedError,
    ApprovalExpiredError,
    ApprovalGuard,
    ApprovalNotFoundError,
    ApprovalSessionError,
)
from worker.protocol.messages import ApprovalMessage, ApprovalResult
from worker.service.auth import authenticate, check_approver
from worker.service.boundary import CallerDenied
from worker.service.runtime import WorkerRuntime


def execute_approval(raw: Any, runtime: WorkerRuntime) -> str:
    """Apply one approval answer; returns :class:`ApprovalResult` as JSON."""
    try:
        message = ApprovalMessage.model_validate(raw)
    except ValidationError as exc:
        return ApprovalResult(status="error", approval_id=str((raw or {}).get("approval_id", "")),
                              error=f"malformed approval message: {exc.error_count()} problem(s)"
                              ).model_dump_json()  # fmt: skip
    result = ApprovalResult(status="error", approval_id=message.approval_id)
    try:
        authenticate(runtime, "approval", message, message.session_id, message.proof,
                     message.call_id)  # fmt: skip
        if message.action == "approve":
            check_approver(runtime, "approval", message, message.approver)
    except CallerDenied as exc:
        result.status, result.error = "denied", str(exc)
        return result.model_dump_json()
    guard: ApprovalGuard = runtime.components["approval"]
    try:
        if message.action == "approve":
            guard.approve(message.approval_id, message.scope, session_id=message.session_id)
            result.status, result.scope = "approved", message.scope
        else:
            guard.deny(message.approval_id, session_id=message.session_id)
            result.status = "denied"
    except (ApprovalNotFoundError, ApprovalSessionError):
        # Another session's approval answers as none at all: an answer that differed would
        # tell a caller which approval ids exist.
        result.status, result.error = "not_found", "no such approval"
    except ApprovalExpiredError:
        result.status, result.error = "expired", "the approval expired: retry the command"
    except ApprovalAlreadyResolvedError:
        result.status, result.error = "resolved", "the approval was already answered"
    return result.model_dump_json()
