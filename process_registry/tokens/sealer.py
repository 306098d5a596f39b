"""Worker-only MACs over stored records: receipts, receipt chain heads, approval grants.

A seal is ``<kid>.<mac>``: the MAC of the record's parts under a sub-key of
keyring key ``kid`` derived for one purpose (so a seal made for a receipt
never verifies as a grant). Only holders of the keyring -- workers and the
operator, never a sandbox -- can make one; anyone can recompute a plain hash,
which is why integrity checks rely on seals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from .keyring import Keyring
from .primitives import mac, same

SealCheck = Literal["ok", "bad", "unknown_key", "missing"]


class Sealer:
    """Seals and checks records for one ``purpose`` with the current keyring."""

    def __init__(self, keyring: Keyring | Callable[[], Keyring], purpose: str) -> None:
        self._keyring = keyring if callable(keyring) else (lambda: keyring)
        self.purpose = purpose

    def seal(self, *parts: str | bytes | int) -> str:
        """The seal of ``parts`` under the signing key."""
        key = self._keyring().signing
        return f"{key.kid}.{mac(key.derived(self.purpose), *parts)}"

    def check(self, seal: str | None, *parts: str | bytes | int) -> SealCheck:
        """``ok``; ``bad`` (forged or the record changed); ``unknown_key`` (made with a key
        removed since, so it cannot be checked); ``missing`` (no seal at all)."""
        if not seal:
            return "missing"
        kid, _, tag = seal.partition(".")
        key = self._keyring().get(kid)
        if key is None:
            return "unknown_key"
        return "ok" if same(mac(key.derived(self.purpose), *parts), tag) else "bad"
