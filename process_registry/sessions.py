"""Session identity: tokens the worker verifies, never identities it takes on trust.

A session token is an HMAC-SHA256 of the session id under the deployment's
secret key. Whoever holds the secret can mint tokens; whoever holds only a
token can act as that one session.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from environments.errors import Invalid

TOKEN_PREFIX = "sbx1."
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")


class InvalidSessionId(Invalid):
    """A session id that is empty, too long or has characters outside ``[A-Za-z0-9._:@-]``."""


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is well formed, else raise :class:`InvalidSessionId`."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise InvalidSessionId(
            "session id must be 1-128 characters of letters, digits and . _ : @ - "
            "(starting with a letter or digit)"
        )
    return session_id


class SessionSigner:
    """Mints and verifies session tokens with one secret key."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the secret key must be at least 16 bytes")
        self._secret = secret

    def token(self, session_id: str) -> str:
        """The token that proves the holder acts as ``session_id``."""
        validate_session_id(session_id)
        mac = hmac.new(self._secret, b"sbx-session:v1:" + session_id.encode(), hashlib.sha256)
        return TOKEN_PREFIX + base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def verify(self, session_id: str, token: str | None) -> bool:
        """True only for the exact token of ``session_id`` (constant-time comparison)."""
        if not token or not isinstance(token, str):
            return False
        try:
            expected = self.token(session_id)
        except InvalidSessionId:
            return False
        return hmac.compare_digest(expected.encode(), token.encode())


def load_or_create_secret(path: Path) -> bytes:
    """The secret stored at ``path``, created (mode 0600, exclusively) on first use."""
    with contextlib.suppress(FileNotFoundError):
        data = path.read_bytes().strip()
        if data:
            return data
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process created it first; use theirs.
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:
        f.write(secret)
        f.flush()
        os.fsync(f.fileno())
    return secret
