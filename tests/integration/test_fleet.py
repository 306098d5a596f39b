"""A session keeps its state on a fleet: three real workers, each with its own SBX_HOME as
if on its own host, sharing one broker (Redis, or RabbitMQ with a Redis ledger)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

from tests.fixtures_fleet import Fleet
from worker.client import SandboxClient
from worker.protocol.leases import lease_key


@pytest.fixture(params=["redis", "amqp"])
def fleet(request: pytest.FixtureRequest, fleet_of: Any) -> Fleet:
    """Three workers on Redis, or on RabbitMQ with the Redis ledger."""
    if request.param == "amqp":
        amqp_url: str = request.getfixturevalue("amqp_url")
        made: Fleet = fleet_of(3, broker_url=amqp_url)
        return made
    started: Fleet = fleet_of(3)
    return started


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def worker_pid(client: SandboxClient) -> int:
    """Pid of the worker whose session shell runs the session's commands."""
    return int(run(client, "echo $PPID")["output"])


def test_a_session_sees_its_state_on_every_call_and_no_other_session_does(
    fleet: Fleet,
) -> None:
    alice, bob = fleet.client("fleet-alice"), fleet.client("fleet-bob")
    assert run(alice, "cd /tmp && export MARK=kept-a")["exit_code"] == 0
    assert run(bob, "cd / && export MARK=kept-b")["exit_code"] == 0
    seen_a, seen_b = [], []
    for _ in range(25):
        seen_a.append(run(alice, 'echo "$PWD:$MARK"')["output"])
        seen_b.append(run(bob, 'echo "$PWD:$MARK"')["output"])
    assert seen_a == ["/tmp:kept-a\n"] * 25
    assert seen_b == ["/:kept-b\n"] * 25


def test_racing_first_calls_of_a_new_session_end_with_one_lease(fleet: Fleet) -> None:
    clients = [fleet.client("fleet-race") for _ in range(4)]
    pids: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(len(clients))

    def first_call(c: SandboxClient) -> None:
        try:
            start.wait(30)
            pids.append(worker_pid(c))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=first_call, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(set(pids)) == 1, pids  # one worker served every racing call
    ledger = redis.Redis.from_url(fleet.ledger_url or fleet.broker_url, decode_responses=True)
    assert ledger.get(lease_key("fleet-race")) == fleet.worker_id(fleet.index_of(pids[0]))


def test_the_session_moves_when_its_worker_dies_with_its_cwd_and_environment(
    fleet: Fleet,
) -> None:
    client = fleet.client("fleet-mover")
    assert run(client, "cd /tmp && export MARK='kept across'")["exit_code"] == 0
    holder = fleet.index_of(worker_pid(client))
    fleet.kill(holder)
    moved = run(client, 'echo "$PWD:$MARK"')
    assert moved["output"] == "/tmp:kept across\n"
    assert moved["session_moved"] is True
    assert fleet.index_of(worker_pid(client)) != holder
    # Settled on its new worker: no further move.
    assert "session_moved" not in run(client, "true")
