"""Approving and denying a session's refused commands, mixed into ``SandboxClient``.

An approval is an ``sbx.approval`` task carrying the session's proof; approving
also needs the approver's proof (``worker.client.auth``). The worker seals its
answer, and only a sealed answer is returned.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from worker.client.budget import ANSWER_SLACK_S
from worker.protocol.messages import ApprovalMessage, ApprovalResult
from worker.protocol.tasks import APPROVAL_TASK

if TYPE_CHECKING:
    from worker.client.auth import ClientAuth

Scope = Literal["once", "session", "always"]


class ApprovalClientMixin:
    """``approve`` and ``deny``; needs the ``SandboxClient`` attributes below."""

    if TYPE_CHECKING:
        session_id: str
        auth: ClientAuth
        ask: Callable[..., str | None]
        """``SandboxClient.ask``."""

    def approve(self, approval_id: str, scope: Scope = "once") -> ApprovalResult:
        """Approve a refused command of this session; then retry the call to run it."""
        return self._answer(approval_id, "approve", scope)

    def deny(self, approval_id: str) -> ApprovalResult:
        """Deny a refused command of this session."""
        return self._answer(approval_id, "deny", "once")

    def _answer(
        self, approval_id: str, action: Literal["approve", "deny"], scope: Scope
    ) -> ApprovalResult:
        message = ApprovalMessage(
            session_id=self.session_id,
            call_id=uuid.uuid4().hex,
            approval_id=approval_id,
            action=action,
            scope=scope,
        )
        message, accept = self.auth.sign("approval", message)
        if action == "approve":
            approver = self.auth.approver_proof("approval", message)
            message = message.model_copy(update={"approver": approver})
        raw = self.ask(APPROVAL_TASK, [message.model_dump(mode="json")], ANSWER_SLACK_S,
                       task_id=message.call_id, accept=accept)  # fmt: skip
        if raw is None:
            return ApprovalResult(status="error", approval_id=approval_id,
                                  error="no worker answered the approval")  # fmt: skip
        answer = json.loads(raw)
        if "approval_id" not in answer:  # a hint (denied, invalid): the client's own text
            status = "denied" if answer.get("status") == "denied" else "error"
            return ApprovalResult(status=status, approval_id=approval_id, error=answer["error"])
        return ApprovalResult.model_validate(answer)
