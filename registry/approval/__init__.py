"""Command approval: dangerous/hardline detection and the approval policy.

Public entry points (docs/approvals.md): :func:`detect_dangerous_command` and
:func:`detect_hardline_command`. The worker builds one :class:`ApprovalGuard`
and calls :meth:`ApprovalGuard.check` before every terminal command (which
raises :class:`CommandTooLong` past the size limit) and
:meth:`ApprovalGuard.check_pty_write` with one :class:`PtyLineBuffer` per pty
process before writing to it.

Layout: :mod:`.shell` (normalise, lex, parse, expand: the shell model),
:mod:`.rules` (one module per family of dangerous commands, the hardline
apart), :mod:`.analyzer`/:mod:`.detect` (the walk and the public detection
functions), :mod:`.policy`, :mod:`.store`/:mod:`.redis_store`, :mod:`.smart`,
:mod:`.config`, :mod:`.pty`, :mod:`.limits`. This package imports nothing from
the rest of ``registry``, ``worker`` or ``process_registry``.
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
from registry.approval.limits import DEFAULT_MAX_COMMAND_BYTES, CommandTooLong
from registry.approval.policy import ApprovalDecision, ApprovalGuard
from registry.approval.prompt import prompt_for_approval
from registry.approval.pty import PtyLine, PtyLineBuffer
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
    "DEFAULT_MAX_COMMAND_BYTES",
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
    "CommandTooLong",
    "Finding",
    "JudgeClient",
    "JudgeSettings",
    "MemoryApprovalStore",
    "PendingApproval",
    "PtyLine",
    "PtyLineBuffer",
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
