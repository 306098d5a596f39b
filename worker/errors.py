"""The errors of sbx's worker package, under the one sbx error root.

Every sbx error derives from :class:`~environments.errors.SbxError` and carries
its wire ``status`` and CLI ``exit_code``; this module re-exports the root, its
generic branches and the errors a client raises (:mod:`worker.protocol.errors`), so
that callers of the worker need only this one import.
"""

from __future__ import annotations

from environments.errors import (
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Denied,
    Invalid,
    NotFound,
    SbxError,
    Unsupported,
)
from worker.protocol.errors import (
    BrokerUnavailable,
    CallError,
    ClientError,
    FileError,
    ForgedResult,
    ProcessError,
    SessionRequired,
    TokenRequired,
)

__all__ = [
    "EXIT_DENIED",
    "EXIT_FAILURE",
    "EXIT_FOR_STATUS",
    "EXIT_NOT_FOUND",
    "EXIT_USAGE",
    "BrokerUnavailable",
    "CallError",
    "ClientError",
    "Denied",
    "FileError",
    "ForgedResult",
    "Invalid",
    "NotFound",
    "ProcessError",
    "SbxError",
    "SessionRequired",
    "TokenRequired",
    "Unsupported",
    "exit_code_for",
]


EXIT_FOR_STATUS: dict[str, int] = {
    **{cls.status: cls.exit_code for cls in (Denied, NotFound, Invalid, Unsupported)},
    # Statuses of results rather than of errors:
    "blocked": EXIT_DENIED,
    "approval_required": EXIT_DENIED,
    "forbidden": EXIT_DENIED,
    "expired": EXIT_USAGE,
    "resolved": EXIT_USAGE,
}
"""The CLI's one table from a wire status to an exit code (anything else: 1)."""


def exit_code_for(status: str | None) -> int:
    """The CLI exit code of a failure whose wire status is ``status``."""
    return EXIT_FOR_STATUS.get(status or "", EXIT_FAILURE)
