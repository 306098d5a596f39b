"""Redis-backed :class:`~registry.approval.store.ApprovalStore` shared by workers.

Contract: same as :mod:`registry.approval.store`; every state transition is one
Lua script (atomic on the server), so two workers checking the same command
get the same approval id and a once-grant is consumed by exactly one run.

Keys (``prefix`` default ``sbx:approval:``)::

    {prefix}rec:{approval_id}     hash: data (JSON), status, scope, session_id, expires_at
    {prefix}dedup:{digest}        approval id of the live pending approval for (session, command)
    {prefix}once:{digest}         once-grant; value = logical expiry time
    {prefix}once-index:{session}  set of digests with once-grants (for clear_session)
    {prefix}session:{session}     set of pattern keys approved for the session
    {prefix}always                set of digests of commands approved always (any session)

Logical expiry uses the caller's clock (``now``); Redis TTLs only garbage-collect
(expiry + ``retention``), so an injected test clock behaves like the memory store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from registry.approval.store import (
    ALWAYS,
    ApprovalAlreadyResolvedError,
    ApprovalExpiredError,
    ApprovalNotFoundError,
    ApprovalSessionError,
    PendingApproval,
    Scope,
    command_digest,
)

__all__ = ["RedisApprovalStore"]

_CREATE = """
local existing = redis.call('GET', KEYS[1])
if existing then
  local rk = ARGV[4] .. existing
  local st = redis.call('HGET', rk, 'status')
  local exp = redis.call('HGET', rk, 'expires_at')
  if st == 'pending' and exp and tonumber(exp) > tonumber(ARGV[2]) then
    return existing
  end
end
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return ARGV[1]
"""

_RESOLVE = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'missing' end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'session_id') ~= ARGV[5] then return 'session' end
if st ~= 'pending' then return 'resolved:' .. st end
local expires_at = tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
if expires_at <= tonumber(ARGV[3]) then return 'expired' end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'scope', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[4] then redis.call('DEL', KEYS[2]) end
if ARGV[6] == 'once' then
  redis.call('SET', KEYS[3], ARGV[9], 'PX', ARGV[7])
  redis.call('SADD', KEYS[4], ARGV[10])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
elseif ARGV[6] == 'session' then
  redis.call('SADD', KEYS[5], unpack(ARGV, 11))
  redis.call('EXPIRE', KEYS[5], ARGV[8])
elseif ARGV[6] == 'always' then
  redis.call('SADD', KEYS[6], ARGV[11])
end
return 'ok'
"""


def _s(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class RedisApprovalStore:
    """:class:`ApprovalStore` on a ``redis.Redis`` client (bytes or decoded responses)."""

    def __init__(
        self,
        client: Any,
        prefix: str = "sbx:approval:",
        *,
        retention: float = 3600.0,
        session_ttl: float = 7 * 86400.0,
    ) -> None:
        self._r = client
        self._p = prefix
        self._retention = retention
        self._session_ttl = int(session_ttl)
        self._create = client.register_script(_CREATE)
        self._resolve = client.register_script(_RESOLVE)

    def _rec(self, approval_id: str) -> str:
        return f"{self._p}rec:{approval_id}"

    def create_or_get_pending(self, record: PendingApproval, *, now: float) -> PendingApproval:
        digest = command_digest(record.session_id, record.command)
        gc_ms = int((max(record.expires_at - now, 1.0) + self._retention) * 1000)
        fields = {
            "data": record.model_dump_json(),
            "status": record.status,
            "scope": "",
            "session_id": record.session_id,
            "expires_at": repr(record.expires_at),
        }
        flat: list[str] = []
        for k, v in fields.items():
            flat.extend((k, v))
        winner = _s(
            self._create(
                keys=[f"{self._p}dedup:{digest}", self._rec(record.approval_id)],
                args=[record.approval_id, repr(now), gc_ms, f"{self._p}rec:", *flat],
            )
        )
        if winner == record.approval_id:
            return record
        existing = self.get(winner)
        # The winner can only vanish if it was garbage-collected in between; retry once.
        return existing if existing is not None else self.create_or_get_pending(record, now=now)

    def get(self, approval_id: str) -> PendingApproval | None:
        raw = self._r.hgetall(self._rec(approval_id))
        if not raw:
            return None
        fields = {_s(k): _s(v) for k, v in raw.items()}
        data = json.loads(fields["data"])
        data["status"] = fields.get("status", "pending")
        data["scope"] = fields.get("scope") or None
        return PendingApproval.model_validate(data)

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
        record = self.get(approval_id)
        if record is None:
            raise ApprovalNotFoundError(f"no approval {approval_id!r}")
        digest = command_digest(record.session_id, record.command)
        effect = "" if not approve or scope is None else scope
        keys: tuple[str, ...] = record.pattern_keys or (record.pattern_key,)
        if effect == "always":
            keys = (command_digest(ALWAYS, record.command),)
        result = _s(
            self._resolve(
                keys=[
                    self._rec(approval_id),
                    f"{self._p}dedup:{digest}",
                    f"{self._p}once:{digest}",
                    f"{self._p}once-index:{record.session_id}",
                    f"{self._p}session:{record.session_id}",
                    f"{self._p}always",
                ],
                args=[
                    "approved" if approve else "denied",
                    (scope or "") if approve else "",
                    repr(now),
                    approval_id,
                    session_id or "",
                    effect,
                    max(int(once_ttl * 1000), 1),
                    max(self._session_ttl, 1),
                    repr(now + once_ttl),
                    digest,
                    *keys,
                ],
            )
        )
        if result == "ok":
            return record.model_copy(
                update={
                    "status": "approved" if approve else "denied",
                    "scope": scope if approve else None,
                }
            )
        if result == "missing":
            raise ApprovalNotFoundError(f"no approval {approval_id!r}")
        if result == "session":
            raise ApprovalSessionError(f"approval {approval_id!r} belongs to another session")
        if result == "expired":
            raise ApprovalExpiredError(f"approval {approval_id!r} expired")
        raise ApprovalAlreadyResolvedError(
            f"approval {approval_id!r} is already {result.split(':', 1)[-1]}"
        )

    def consume_once(self, session_id: str, command: str, *, now: float) -> bool:
        value = self._r.getdel(f"{self._p}once:{command_digest(session_id, command)}")
        if value is None:
            return False
        try:
            return float(_s(value)) > now
        except ValueError:
            return False

    def session_keys(self, session_id: str) -> frozenset[str]:
        return frozenset(_s(k) for k in self._r.smembers(f"{self._p}session:{session_id}"))

    def add_session_keys(self, session_id: str, keys: Iterable[str]) -> None:
        keys = list(keys)
        if not keys:
            return
        key = f"{self._p}session:{session_id}"
        pipe = self._r.pipeline(transaction=True)
        pipe.sadd(key, *keys)
        pipe.expire(key, max(self._session_ttl, 1))
        pipe.execute()

    def always_allowed(self, command: str) -> bool:
        return bool(self._r.sismember(f"{self._p}always", command_digest(ALWAYS, command)))

    def clear_session(self, session_id: str) -> None:
        index = f"{self._p}once-index:{session_id}"
        digests = [_s(d) for d in self._r.smembers(index)]
        self._r.delete(
            f"{self._p}session:{session_id}", index, *(f"{self._p}once:{d}" for d in digests)
        )
