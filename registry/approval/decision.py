"""The verdict of the approval guard for one command, and its model-facing form.

Contract: :class:`ApprovalDecision` is immutable; :meth:`ApprovalDecision.to_tool_result`
gives the ``terminal`` refusal of docs/tool-calls.md (``approval_required`` or
``blocked``), or None when the command may run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["ApprovalDecision", "Outcome"]

Outcome = Literal["allow", "approval_required", "blocked"]


class ApprovalDecision(BaseModel):
    """The verdict for one command (see :class:`ApprovalGuard`)."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome
    pattern_key: str | None = None
    description: str | None = None
    approval_id: str | None = None
    reason: str | None = None

    @property
    def allowed(self) -> bool:
        """True when the command may run now."""
        return self.outcome == "allow"

    def to_tool_result(self) -> dict[str, Any] | None:
        """The model-facing ``terminal`` refusal (docs/tool-calls.md); None when allowed."""
        if self.outcome == "approval_required":
            return {
                "status": "approval_required",
                "approval_id": self.approval_id,
                "pattern_key": self.pattern_key,
                "description": self.description,
            }
        if self.outcome == "blocked":
            return {"status": "blocked", "error": self.reason or "command blocked"}
        return None
