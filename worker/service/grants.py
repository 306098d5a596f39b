"""Approval grants that count only with a worker's seal.

The approval store (``registry.approval``) keeps its grants in the ledger,
which a sandbox that reaches the ledger could write to. :class:`SealedGrants`
wraps that store: when a grant is made it also writes a seal (a MAC with a
worker-only key, ``process_registry.tokens.sealer``), and a grant read back
counts only when its seal checks:

* a ``once`` grant: ``<approval id>:<expiry>:<seal>`` over the session, the
  command's digest, the approval id and the expiry; it is honoured once per
  approval id (a replayed seal of a consumed approval grants nothing);
* a ``session`` grant: per pattern key, ``<expiry>:<seal>`` over the session,
  the key and the expiry;
* an ``always`` grant (that exact command, every session): a seal over the
  command's digest, kept as long as the grant.

A grant without a valid seal is ignored (and logged): the command is refused
again, as if never approved. Everything else is the wrapped store's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import redis

from process_registry.tokens.sealer import Sealer
from registry.approval.store import (
    ALWAYS,
    ApprovalStore,
    PendingApproval,
    Scope,
    command_digest,
)

log = logging.getLogger(__name__)

GRANTS_PURPOSE = "approval-grant"
_PREFIX = "sbx:approval-seal:"
_USED_TTL_S = 7 * 86400
_SESSION_TTL_S = 7 * 86400


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SealedGrants:
    """An :class:`~registry.approval.store.ApprovalStore` whose grants need a worker seal."""

    def __init__(self, inner: ApprovalStore, client: redis.Redis, sealer: Sealer) -> None:
        self.inner = inner
        self.client = client
        self.sealer = sealer

    def __getattr__(self, name: str) -> Any:
        # Whatever else the wrapped store offers is its own business.
        return getattr(self.inner, name)

    def create_or_get_pending(self, record: PendingApproval, *, now: float) -> PendingApproval:
        return self.inner.create_or_get_pending(record, now=now)

    def get(self, approval_id: str) -> PendingApproval | None:
        return self.inner.get(approval_id)

    def resolve(
        self,
        approval_id: str,
        *,
        approve: bool,
        scope: Scope | None,
        session_id: str | None,
        now: float,
        once_ttl: float,
    ) -> PendingApproval:
        """The wrapped ``resolve``; an approval's seals are written first (a seal without a
        grant grants nothing; a grant without its seal would be ignored)."""
        record = self.inner.get(approval_id) if approve and scope is not None else None
        sealed: list[str] = []
        if record is not None and record.status == "pending":
            sealed = self._seal(record, scope, now, once_ttl)
        try:
            return self.inner.resolve(
                approval_id, approve=approve, scope=scope, session_id=session_id, now=now,
                once_ttl=once_ttl,
            )  # fmt: skip
        except Exception:
            if sealed:
                self.client.delete(*sealed)
            raise

    def _seal(
        self, record: PendingApproval, scope: Scope | None, now: float, once_ttl: float
    ) -> list[str]:
        session = record.session_id
        if scope == "once":
            digest = command_digest(session, record.command)
            expires = int(now + once_ttl) + 1
            seal = self.sealer.seal("once", session, digest, record.approval_id, expires)
            key = f"{_PREFIX}once:{digest}"
            self.client.set(key, f"{record.approval_id}:{expires}:{seal}", px=int(once_ttl * 1000))
            return [key]
        if scope == "always":
            digest = command_digest(ALWAYS, record.command)
            self.client.hset(f"{_PREFIX}always", digest, self.sealer.seal("always", digest))
            return []
        keys = record.pattern_keys or (record.pattern_key,)
        self._seal_session_keys(session, keys)
        return []

    def _seal_session_keys(self, session: str, keys: Iterable[str]) -> None:
        expires = int(time.time()) + _SESSION_TTL_S
        seals: dict[Any, Any] = {
            k: f"{expires}:{self.sealer.seal('session', session, k, expires)}" for k in keys
        }
        if not seals:
            return
        hkey = f"{_PREFIX}session:{session}"
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(hkey, mapping=seals)
        pipe.expire(hkey, _SESSION_TTL_S)
        pipe.execute()

    def consume_once(self, session_id: str, command: str, *, now: float) -> bool:
        """True only for a once-grant whose seal checks and whose approval was not used."""
        if not self.inner.consume_once(session_id, command, now=now):
            return False
        digest = command_digest(session_id, command)
        raw = self.client.getdel(f"{_PREFIX}once:{digest}")
        approval_id, _, rest = _s(raw).partition(":") if raw is not None else ("", "", "")
        expires, _, seal = rest.partition(":")
        used = f"{_PREFIX}used:{approval_id}"
        ok = (
            expires.isdigit()
            and int(expires) > now
            and self.sealer.check(seal, "once", session_id, digest, approval_id, int(expires))
            == "ok"
            and bool(self.client.set(used, "1", nx=True, ex=_USED_TTL_S))
        )
        if not ok:
            log.warning("an approval grant without a valid seal was ignored (session %s)",
                        session_id)  # fmt: skip
        return ok

    def session_keys(self, session_id: str) -> frozenset[str]:
        """The wrapped store's session keys that carry a valid, unexpired seal."""
        keys = self.inner.session_keys(session_id)
        if not keys:
            return keys
        raw: Any = self.client.hgetall(f"{_PREFIX}session:{session_id}")
        seals = {_s(k): _s(v) for k, v in raw.items()}
        now = time.time()
        valid = set()
        for key in keys:
            expires, _, seal = seals.get(key, "").partition(":")
            if (expires.isdigit() and int(expires) > now and
                    self.sealer.check(seal, "session", session_id, key, int(expires)) == "ok"):
                valid.add(key)  # fmt: skip
        if len(valid) < len(keys):
            log.warning("session approvals without a valid seal were ignored (session %s)",
                        session_id)  # fmt: skip
        return frozenset(valid)

    def always_allowed(self, command: str) -> bool:
        """True only for an always-grant whose seal checks."""
        if not self.inner.always_allowed(command):
            return False
        digest = command_digest(ALWAYS, command)
        seal: Any = self.client.hget(f"{_PREFIX}always", digest)
        if seal is not None and self.sealer.check(_s(seal), "always", digest) == "ok":
            return True
        log.warning("an 'always' approval without a valid seal was ignored")
        return False

    def add_session_keys(self, session_id: str, keys: Iterable[str]) -> None:
        keys = list(keys)
        self._seal_session_keys(session_id, keys)
        self.inner.add_session_keys(session_id, keys)

    def clear_session(self, session_id: str) -> None:
        self.inner.clear_session(session_id)
        self.client.delete(f"{_PREFIX}session:{session_id}")
