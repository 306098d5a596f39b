"""The errors a client raises: part of the wire contract, under sbx's one error root.

A platform that imports only the client catches these; ``worker.errors`` re-exports
them for the rest of sbx. They derive from :class:`~environments.errors.SbxError`
(a leaf, the root of every sbx error) and carry its wire ``status``.
"""

from __future__ import annotations

from typing import Any

from environments.errors import Denied, Invalid, SbxError

__all__ = [
    "BrokerUnavailable",
    "CallError",
    "ClientError",
    "FileError",
    "ForgedResult",
    "ProcessError",
    "SessionRequired",
    "TokenRequired",
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
