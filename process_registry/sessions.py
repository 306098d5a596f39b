"""Session identity: tokens the worker verifies, never identities it takes on trust.

Two token formats (docs/configuration.md, "Keys and tokens"; parsed in
:mod:`process_registry.tokens.formats`):

* ``sbx2.<kid>.<expiry>.<mac>`` -- the MAC (43 base64url characters) is an
  HMAC-SHA256 under key ``kid`` of the session id, the key id, the expiry
  (unix seconds) and the session's *revocation epoch* (0 until the session is
  first revoked). A token stops verifying when it expires, when its key is
  removed from the keyring, or when its session is revoked (the epoch moves,
  so every token minted before no longer matches; tokens minted after do).
* ``sbx1.<mac>`` -- HMAC-SHA256 of the session id under a key, with neither
  expiry nor key id. Verified against every key while ``accept_v1`` is on
  (``SBX_ACCEPT_V1_TOKENS=false`` turns it off); never valid for a session
  that was revoked.

Whoever holds a key can mint tokens; whoever holds only a token can act as
that one session until the token expires or is revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

from .tokens.formats import (
    TOKEN_PREFIX,
    V1_PREFIX,
    InvalidSessionId,
    TokenInfo,
    token_info,
    validate_session_id,
)
from .tokens.keyring import Keyring, load_or_create_secret
from .tokens.primitives import b64, mac, same

DEFAULT_TTL = 8 * 3600.0

__all__ = ["DEFAULT_TTL", "SessionSigner", "load_or_create_secret"]


class SessionSigner:
    """Mints and verifies session tokens with a keyring (or one secret key)."""

    def __init__(
        self,
        keys: bytes | Keyring | Callable[[], Keyring],
        *,
        accept_v1: bool = True,
        default_ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``keys``: one secret, a :class:`Keyring`, or a function returning the current one
        (``KeyringStore.current``: keys rotated meanwhile are seen)."""
        if isinstance(keys, bytes):
            ring = Keyring.of(keys)
            self._keyring: Callable[[], Keyring] = lambda: ring
        elif isinstance(keys, Keyring):
            self._keyring = lambda: keys
        else:
            self._keyring = keys
        self.accept_v1 = accept_v1
        self.default_ttl = default_ttl
        self.clock = clock

    @property
    def keyring(self) -> Keyring:
        """The keys as they are now."""
        return self._keyring()

    def token(self, session_id: str, *, ttl: float | None = None, epoch: int = 0) -> str:
        """A v2 token for ``session_id`` valid ``ttl`` seconds (default: ``default_ttl``).

        ``epoch`` is the session's revocation epoch (0 when never revoked).
        """
        validate_session_id(session_id)
        ttl = self.default_ttl if ttl is None else ttl
        if ttl <= 0:
            raise ValueError("a token's lifetime must be positive")
        key = self.keyring.signing
        expires = int(self.clock() + ttl)
        return self._v2(key.secret, session_id, key.kid, expires, epoch)

    @staticmethod
    def _v2(secret: bytes, session_id: str, kid: str, expires: int, epoch: int) -> str:
        tag = mac(secret, "sbx-session:v2", session_id, kid, expires, epoch)
        return f"{TOKEN_PREFIX}{kid}.{expires}.{tag}"

    def token_v1(self, session_id: str) -> str:
        """The v1 token of ``session_id`` under the signing key (no expiry, no key id)."""
        validate_session_id(session_id)
        return self._v1(self.keyring.signing.secret, session_id)

    @staticmethod
    def _v1(secret: bytes, session_id: str) -> str:
        digest = hmac.new(secret, b"sbx-session:v1:" + session_id.encode(), hashlib.sha256)
        return V1_PREFIX + b64(digest.digest())

    def candidates(self, session_id: str, info: TokenInfo, epoch: int = 0) -> list[str]:
        """The tokens ``info`` can stand for if it is valid now: what a caller holding
        the real token used as MAC key. Empty when the key is unknown or removed,
        the token expired, or it is a v1 token and v1 is off or the session was revoked.
        """
        try:
            validate_session_id(session_id)
        except InvalidSessionId:
            return []
        ring = self.keyring
        if info.v1:
            if not self.accept_v1 or epoch != 0:
                return []
            return [self._v1(k.secret, session_id) for k in ring.keys]
        key = ring.get(info.kid)
        if key is None or info.expires <= self.clock():
            return []
        return [self._v2(key.secret, session_id, info.kid, info.expires, epoch)]

    def verify(self, session_id: str, token: str | None, epoch: int = 0) -> bool:
        """True only for a valid token of ``session_id`` (constant-time comparisons)."""
        info = token_info(token)
        if info is None:
            return False
        return any(same(c, token) for c in self.candidates(session_id, info, epoch))
