"""Routes of running processes and each session's index of them, on a real redis-server."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest
import redis

from process_registry.receipts import DEFAULT_MAX_AGE
from tests.helpers import redis_server
from worker.protocol.ledger import read_route, route_key
from worker.service.forwarding import ProcessForwarder
from worker.service.process_routes import ProcessRoutes, session_index_key, session_routes

if TYPE_CHECKING:
    from worker.service.runtime import WorkerRuntime


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    # A server of its own: the command counts below see only this module's commands.
    with redis_server() as url:
        conn = redis.Redis.from_url(url)
        yield conn
        conn.close()


def _session() -> str:
    return f"sbx-routes-{secrets.token_hex(4)}"


def _routes(client: redis.Redis, queue: str) -> ProcessRoutes:
    return ProcessRoutes(client, queue, f"worker-{queue}", receipt_ttl_s=3600)


def test_a_session_finds_its_running_processes_on_every_worker(client: redis.Redis) -> None:
    s1, s2 = _session(), _session()
    on_a, on_b = _routes(client, "q.a"), _routes(client, "q.b")
    on_a.record("p-a1", s1)
    on_b.record("p-b1", s1)
    on_b.record("p-b2", s2)
    found = session_routes(client, s1)
    assert {pid: r["queue"] for pid, r in found.items()} == {"p-a1": "q.a", "p-b1": "q.b"}
    assert found["p-a1"] == {"queue": "q.a", "session": s1, "worker": "worker-q.a"}
    assert set(session_routes(client, s2)) == {"p-b2"}
    assert 0 < int(client.ttl(session_index_key(s1))) <= int(DEFAULT_MAX_AGE)
    # What a worker forwards a session's list to: the other workers holding its processes.
    runtime = cast("WorkerRuntime", SimpleNamespace(ledger=SimpleNamespace(client=client)))
    assert ProcessForwarder(runtime, "q.a").session_queues(s1) == {"q.b"}
    assert ProcessForwarder(runtime, "q.b").session_queues(s1) == {"q.a"}
    assert ProcessForwarder(runtime, "q.b").session_queues(s2) == set()


def test_a_finished_process_leaves_the_index_and_points_to_its_receipt(
    client: redis.Redis,
) -> None:
    session = _session()
    routes = _routes(client, "q.a")
    routes.record("p-done", session)
    routes.record("p-running", session)
    routes.finished("p-done", session)
    assert set(session_routes(client, session)) == {"p-running"}
    receipt = read_route(client, "p-done", receipt=True)
    assert receipt is not None and receipt["queue"] == "q.a"
    routes.finished("p-running", session)
    assert session_routes(client, session) == {}
    assert client.exists(session_index_key(session)) == 0


def test_gone_or_foreign_routes_are_not_answered(client: redis.Redis) -> None:
    session, other = _session(), _session()
    routes = _routes(client, "q.a")
    routes.record("p-expired", session)
    routes.record("p-kept", session)
    client.delete(route_key("p-expired"))  # as if it expired with its worker gone
    # A route rewritten to name another session is that session's, not this one's.
    client.sadd(session_index_key(session), "p-foreign")
    client.set(route_key("p-foreign"), json.dumps({"queue": "q.x", "session": other}))
    client.sadd(session_index_key(session), "p-garbage")
    client.set(route_key("p-garbage"), b"\xff not json")
    assert set(session_routes(client, session)) == {"p-kept"}


def test_finding_a_sessions_processes_reads_only_that_session(client: redis.Redis) -> None:
    session = _session()
    routes = _routes(client, "q.a")
    for i in range(300):  # the rest of a busy fleet
        routes.record(f"p-fleet-{i}", f"sbx-fleet-{i}")
    routes.record("p-mine", session)
    client.config_resetstat()
    assert set(session_routes(client, session)) == {"p-mine"}
    stats = client.info("commandstats")
    ours = {"cmdstat_info", "cmdstat_config|resetstat"}
    calls = {name: int(stat["calls"]) for name, stat in stats.items() if name not in ours}
    # The index and the routes it names: two commands, however many routes the fleet holds.
    assert calls == {"cmdstat_smembers": 1, "cmdstat_mget": 1}, calls
