"""A session keeps its state on a fleet: three real workers, each with its own SBX_HOME as
if on its own host, sharing one broker (Redis, or RabbitMQ with a Redis ledger)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
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


def worker_pid(fleet: Fleet, client: SandboxClient) -> int:
    """Pid of the worker whose session shell runs the session's commands."""
    return fleet.serving_pid(client)


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
            pids.append(worker_pid(fleet, c))
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
    holder = fleet.index_of(worker_pid(fleet, client))
    fleet.kill(holder)
    moved = run(client, 'echo "$PWD:$MARK"')
    assert moved["output"] == "/tmp:kept across\n"
    assert moved["session_moved"] is True
    assert fleet.index_of(worker_pid(fleet, client)) != holder
    # Settled on its new worker: no further move.
    assert "session_moved" not in run(client, "true")


def test_wait_during_a_worker_restart_answers_within_its_timeout(
    fleet_of: Any, tmp_path: Path
) -> None:
    """The process's worker is SIGKILLed and restarted on its home; a wait sent meanwhile
    answers with the process's end (adopted by the restarted worker) within its timeout."""
    fleet: Fleet = fleet_of(1, SBX_LOST_AFTER="3", SBX_HEARTBEAT_INTERVAL="0.3")
    client = fleet.client("fleet-waiter")
    gate = tmp_path / "go"  # a directory the sandbox shares with the test (not SBX_HOME)
    started = client.start(f"while [ ! -e {gate} ]; do sleep 0.1; done; exit 5")
    fleet.kill(0)
    gate.touch()
    restart = threading.Thread(target=fleet.start, args=(0,))
    restart.start()
    begun = time.monotonic()
    final = client.wait(started.process_id, timeout=20)
    waited = time.monotonic() - begun
    restart.join(120)
    assert (final.status, final.exit_code) == ("exited", 5)
    # The caller's own timeout bounds the wait (plus the answer's way back).
    assert waited < 20 + 5


def test_sigterm_cancels_running_calls_after_the_grace_and_frees_the_session(
    fleet_of: Any, tmp_path: Path
) -> None:
    fleet: Fleet = fleet_of(2, SBX_SHUTDOWN_GRACE="1", SBX_LOST_AFTER="3")
    client = fleet.client("fleet-graceful")
    holder = fleet.index_of(worker_pid(fleet, client))
    started = tmp_path / "started"
    answers: list[dict[str, Any]] = []
    running = threading.Thread(
        target=lambda: answers.append(run(client, f"touch {started}; sleep 300"))
    )
    running.start()
    wait_until(started.exists, 60, "the long call to start")
    worker = fleet.workers[holder]
    assert worker is not None and worker.proc is not None
    worker.proc.send_signal(signal.SIGTERM)
    running.join(120)
    assert worker.proc.wait(60) == 0
    assert answers and (answers[0]["exit_code"], answers[0]["status"]) == (130, "cancelled")
    assert "the worker shutting down" in answers[0]["error"]
    # Its lease was given up: the next call runs on the other worker at once.
    moved = run(client, "echo next")
    assert moved["output"] == "next\n" and moved["session_moved"] is True


def test_state_in_bytes_that_are_not_utf8_moves_with_the_session(
    fleet_of: Any, tmp_path: Path
) -> None:
    """A variable and a cwd the shell holds in bytes that are not UTF-8 are recorded for
    the session's next worker (they used to make the record fail); the model reads text."""
    fleet: Fleet = fleet_of(2)
    where = Path(os.fsdecode(bytes(tmp_path) + b"/d\xff"))  # pytest's dirs: in every jail
    where.mkdir()
    client = fleet.client("fleet-raw-bytes")
    made = run(client, f"cd '{tmp_path}'/d* && export RAW=\"x$(printf '\\377')\"")
    assert made["exit_code"] == 0 and made["cwd"] == f"{tmp_path}/d\ufffd", made
    holder = fleet.index_of(worker_pid(fleet, client))
    fleet.kill(holder)
    moved = run(client, '[ "$RAW" = "x$(printf \'\\377\')" ] && pwd | od -An -tx1')
    assert moved["session_moved"] is True, moved
    assert moved["output"].split()[-3:] == ["64", "ff", "0a"], moved
    assert fleet.index_of(worker_pid(fleet, client)) != holder
