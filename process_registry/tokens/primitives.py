"""The MAC primitives every sbx credential is built from.

One construction everywhere: HMAC-SHA256 over *length-prefixed* parts, so no
two different part lists can produce the same input (``("ab", "c")`` and
``("a", "bc")`` differ), rendered as unpadded base64url (43 characters).
Keys for different purposes are derived from one secret with
:func:`derive`, so a MAC made for one purpose never verifies for another.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

MAC_LENGTH = 43
"""Characters of a rendered MAC (32 bytes, base64url, no padding)."""


def b64(data: bytes) -> str:
    """``data`` as unpadded base64url."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _encode(part: str | bytes | int) -> bytes:
    if isinstance(part, bytes):
        return part
    return str(part).encode()


def mac(key: bytes, *parts: str | bytes | int) -> str:
    """HMAC-SHA256 of the length-prefixed ``parts`` under ``key``, base64url (43 chars)."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        data = _encode(part)
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return b64(h.digest())


def same(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two MACs or tokens (False when either is missing)."""
    if not a or not b:
        return False
    return hmac.compare_digest(a.encode(), b.encode())


def derive(secret: bytes, purpose: str) -> bytes:
    """A 32-byte key for ``purpose`` derived from ``secret`` (HMAC-SHA256 as a PRF)."""
    return hmac.new(secret, b"sbx-derive:" + purpose.encode(), hashlib.sha256).digest()


def canonical(value: Any) -> bytes:
    """The canonical JSON bytes of ``value``: sorted keys, compact, UTF-8.

    A value that went through JSON once (a queued message) canonicalises to
    the same bytes as the original, which is what makes a MAC over it
    verifiable on the other side.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate (JSON allows one as an escape) still has one encoding here, so a
    # call carrying one is signed and judged by the worker, not refused by the client.
    return text.encode("utf-8", "surrogatepass")
