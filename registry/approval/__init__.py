"""Command approval: dangerous/hardline detection and the approval policy.

Public entry points (CONTRACT.md): :func:`detect_dangerous_command` and
:func:`detect_hardline_command`. The worker builds one :class:`ApprovalGuard`
and calls :meth:`ApprovalGuard.check` before every terminal command.
``RedisApprovalStore`` is imported lazily (it needs only a client object, but
keeps ``redis`` out of the import path of detection-only users).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from registry.approval.config import (
    ApprovalConfigError,
    ApprovalConfigSource,
    ApprovalSettings,
    JudgeSettings,
)
from registry.approval.detect import (
    ALL_PATTERN_KEYS,
    HARDLINE_KEYS,
    Analysis,
    Finding,
    analyze_command,
    detect_dangerous_command,
    detect_hardline_command,
)
from registry.approval.policy import ApprovalDecision, ApprovalGuard
from registry.approval.prompt import prompt_for_approval
from registry.approval.smart import JudgeClient
from registry.approval.store import (
    ApprovalAlreadyResolvedError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalNotFoundError,
    ApprovalSessionError,
    ApprovalStore,
    MemoryApprovalStore,
    PendingApproval,
)

if TYPE_CHECKING:
    from registry.approval.redis_store import RedisApprovalStore

__all__ = [
    "ALL_PATTERN_KEYS",
    "HARDLINE_KEYS",
    "Analysis",
    "ApprovalAlreadyResolvedError",
    "ApprovalConfigError",
    "ApprovalConfigSource",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalGuard",
    "ApprovalNotFoundError",
    "ApprovalSessionError",
    "ApprovalSettings",
    "ApprovalStore",
    "Finding",
    "JudgeClient",
    "JudgeSettings",
    "MemoryApprovalStore",
    "PendingApproval",
    "RedisApprovalStore",
    "analyze_command",
    "detect_dangerous_command",
    "detect_hardline_command",
    "prompt_for_approval",
]


def __getattr__(name: str) -> Any:
    if name == "RedisApprovalStore":
        from registry.approval.redis_store import RedisApprovalStore

        return RedisApprovalStore
    raise AttributeError(name)
