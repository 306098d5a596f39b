"""What an id or credential says about itself: the formats of session ids, session
tokens and approver credentials. No keys here: parsing a token says nothing of its
validity (only recomputing it with a key does, :mod:`process_registry.sessions`).

A leaf the wire protocol and its clients use without loading any key handling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from environments.errors import Invalid

TOKEN_PREFIX = "sbx2."
V1_PREFIX = "sbx1."
V1_KID = "v1"
"""The key id a message names for a v1 token (which names none)."""
APPROVER_PREFIX = "sbxa1."

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")
_V2 = re.compile(r"sbx2\.([A-Za-z0-9_-]{8})\.([0-9]{1,12})\.([A-Za-z0-9_-]{43})\Z")
_V1 = re.compile(r"sbx1\.[A-Za-z0-9_-]{43}\Z")
_APPROVER = re.compile(r"sbxa1\.([A-Za-z0-9_-]{8})\.[A-Za-z0-9_-]{43}\Z")


class InvalidSessionId(Invalid):
    """A session id that is empty, too long or has characters outside ``[A-Za-z0-9._:@-]``."""


def is_session_id(value: object) -> bool:
    """Whether ``value`` is a well-formed session id."""
    return isinstance(value, str) and _SESSION_ID.match(value) is not None


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is well formed, else raise :class:`InvalidSessionId`."""
    if not is_session_id(session_id):
        raise InvalidSessionId(
            "session id must be 1-128 characters of letters, digits and . _ : @ - "
            "(starting with a letter or digit)"
        )
    return session_id


@dataclass(frozen=True)
class TokenInfo:
    """What a token says about itself: its key id and expiry (``v1``/0 for a v1 token)."""

    kid: str
    expires: int

    @property
    def v1(self) -> bool:
        return self.kid == V1_KID


def token_info(token: str | None) -> TokenInfo | None:
    """The key id and expiry of a well-formed session token; None for anything else."""
    if not isinstance(token, str):
        return None
    m = _V2.match(token)
    if m is not None:
        return TokenInfo(m.group(1), int(m.group(2)))
    return TokenInfo(V1_KID, 0) if _V1.match(token) else None


def approver_kid(token: str | None) -> str | None:
    """The key id of a well-formed approver credential (None: not one)."""
    m = _APPROVER.match(token) if isinstance(token, str) else None
    return m.group(1) if m else None
