"""The errors of sbx's worker package, under the one sbx error root.

Every sbx error derives from :class:`~environments.errors.SbxError` and carries
its wire ``status`` and CLI ``exit_code``; this module re-exports the root and
its generic branches so that callers of the worker need only this one import.
"""

from __future__ import annotations

from typing import Any

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


class ClientError(SbxError, RuntimeError):
    """The client could not be set up (no session, no token, no broker)."""


class SessionRequired(ClientError, Invalid):
    """No session id was given (argument or ``SBX_SESSION_ID``), or it is malformed."""


class TokenRequired(ClientError, Denied):
    """No session token was given and none can be minted here."""


class ForgedResult(ClientError):
    """Only answers that failed their authentication check came back for a call: someone
    other than a worker wrote into its mailbox. None of it was returned."""

    status = "forged"


class BrokerUnavailable(ClientError):
    """The broker could not be reached: the message says whether the call was sent."""


class CallError(SbxError, RuntimeError):
    """A call answered an error; ``status`` is its wire status (``denied``, ``not_found``,
    ``invalid``, ``pending``, ``error``, ...) and ``result`` the whole answer."""

    def __init__(
        self, message: str, status: str = "error", result: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.result = result or {}


class ProcessError(CallError):
    """A process or receipt action answered an error (see :class:`CallError`)."""


class FileError(CallError):
    """An upload or download answered an error, or its bytes arrived incomplete
    (see :class:`CallError`)."""


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
