"""RedisApprovalStore specifics against a real redis-server.

The semantics shared with the memory store are exercised by the policy tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from registry.approval import ApprovalExpiredError, PendingApproval
from registry.approval.redis_store import RedisApprovalStore
from registry.approval.store import command_digest


def _record(
    approval_id: str, now: float, session: str = "s1", command: str = "rm -rf b"
) -> PendingApproval:
    return PendingApproval(
        approval_id=approval_id,
        session_id=session,
        command=command,
        pattern_key="recursive_delete",
        pattern_keys=("recursive_delete", "system_path_delete"),
        description="recursive delete",
        created_at=now,
        expires_at=now + 300,
    )


@pytest.mark.parametrize("decode", [False, True])
def test_round_trip_and_key_layout(redis_server: str, decode: bool) -> None:
    import redis

    client = redis.Redis.from_url(redis_server, decode_responses=decode)
    client.flushall()
    store = RedisApprovalStore(client, prefix="x:")
    now = 1000.0
    rec = store.create_or_get_pending(_record("a1", now), now=now)
    assert rec.approval_id == "a1"
    assert store.create_or_get_pending(_record("a2", now), now=now).approval_id == "a1"
    assert store.get("a1") == rec
    assert store.get("a2") is None
    digest = command_digest("s1", "rm -rf b")
    assert client.exists("x:rec:a1", f"x:dedup:{digest}") == 2
    assert client.pttl("x:rec:a1") > 0  # garbage-collected eventually
    updated = store.resolve(
        "a1", approve=True, scope="session", session_id="s1", now=now + 1, once_ttl=60
    )
    assert updated.status == "approved" and updated.scope == "session"
    assert store.get("a1") == updated
    assert store.session_keys("s1") == {"recursive_delete", "system_path_delete"}
    assert not client.exists(f"x:dedup:{digest}")
    client.close()


def test_once_grant_uses_getdel_and_logical_expiry(redis_client: Any) -> None:
    store = RedisApprovalStore(redis_client)
    now = 5000.0
    store.create_or_get_pending(_record("b1", now), now=now)
    store.resolve("b1", approve=True, scope="once", session_id="s1", now=now, once_ttl=60)
    assert store.consume_once("s1", "rm -rf b", now=now + 1)
    assert not store.consume_once("s1", "rm -rf b", now=now + 1)
    store.create_or_get_pending(_record("b2", now), now=now)
    store.resolve("b2", approve=True, scope="once", session_id="s1", now=now, once_ttl=60)
    assert not store.consume_once("s1", "rm -rf b", now=now + 61)


def test_expired_pending_is_replaced_and_cannot_resolve(redis_client: Any) -> None:
    store = RedisApprovalStore(redis_client)
    now = 9000.0
    store.create_or_get_pending(_record("c1", now), now=now)
    later = now + 301
    assert store.create_or_get_pending(_record("c2", later), now=later).approval_id == "c2"
    with pytest.raises(ApprovalExpiredError):
        store.resolve("c1", approve=True, scope="once", session_id="s1", now=later, once_ttl=60)


def test_clear_session_removes_grants(redis_client: Any) -> None:
    store = RedisApprovalStore(redis_client)
    now = 100.0
    store.create_or_get_pending(_record("d1", now), now=now)
    store.resolve("d1", approve=True, scope="once", session_id="s1", now=now, once_ttl=60)
    store.add_session_keys("s1", ["mass_kill"])
    store.clear_session("s1")
    assert store.session_keys("s1") == frozenset()
    assert not store.consume_once("s1", "rm -rf b", now=now)
