"""Graceful shutdown of a real worker (SIGTERM), as an orchestrator stops one: it takes no
new calls, lets a running call finish within the grace and cancels the one that does not,
gives up its leases, leaves its background process to be adopted, and exits in time."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from worker.client import SandboxClient

GRACE = 15.0


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def running_calls(fleet: Fleet, index: int) -> int:
    ledger = redis.Redis.from_url(fleet.broker_url, decode_responses=True)
    return list(ledger.hvals("sbx:calls:running")).count(fleet.worker_id(index))


def test_sigterm_finishes_cancels_hands_over_and_exits_within_the_grace(
    fleet_of: Any, tmp_path: Path
) -> None:
    fleet: Fleet = fleet_of(2, SBX_SHUTDOWN_GRACE=str(GRACE), SBX_LOST_AFTER="3")
    other = fleet.workers[1]
    assert other is not None
    other.stop()  # sessions start on worker 0 alone; worker 1 comes back below
    finishing, stuck = fleet.client("shutdown-finishing"), fleet.client("shutdown-stuck")
    assert run(finishing, "cd /tmp && export KEPT=yes")["exit_code"] == 0
    assert run(stuck, "true")["exit_code"] == 0
    # Gates in a directory the jailed sandbox shares with the test (not SBX_HOME).
    gate, bg_gate = tmp_path / "finish", tmp_path / "bg-finish"
    background = finishing.start(f"while [ ! -e {bg_gate} ]; do sleep 0.1; done; exit 7")
    fleet.start(1)

    answers: dict[str, dict[str, Any]] = {}
    calls = [
        threading.Thread(target=lambda: answers.update(finishing=run(
            finishing, f"while [ ! -e {gate} ]; do sleep 0.1; done; echo finished"))),
        threading.Thread(target=lambda: answers.update(stuck=run(stuck, "sleep 600"))),
    ]  # fmt: skip
    for t in calls:
        t.start()
    wait_until(lambda: running_calls(fleet, 0) == 2, 60, "both calls to run on worker 0")
    leaving = fleet.workers[0]
    assert leaving is not None and leaving.proc is not None
    leaving.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()

    # No new call is taken: a new session's first call runs on worker 1.
    newcomer = fleet.client("shutdown-newcomer")
    assert fleet.serving_pid(newcomer) == fleet.pid(1)
    gate.touch()  # the running call ends within the grace: its answer is the real one
    for t in calls:
        t.join(GRACE + 120)
    assert leaving.proc.wait(GRACE + 120) == 0
    took = time.monotonic() - signalled
    assert (answers["finishing"]["exit_code"], answers["finishing"]["output"]) == (0, "finished\n")
    assert (answers["stuck"]["exit_code"], answers["stuck"]["status"]) == (130, "cancelled")
    # The grace bounds the stop: the stuck call was cancelled at it, not before, and the
    # worker exited soon after (a wide margin: the machine may be loaded).
    assert GRACE <= took < GRACE + 60, took

    # Leases were given up: the next call moves the session, with its state.
    moved = run(finishing, 'echo "$PWD:$KEPT"')
    assert moved["output"] == "/tmp:yes\n" and moved["session_moved"] is True
    assert fleet.serving_pid(finishing) == fleet.pid(1)

    # The background process outlived its worker; the worker's successor adopts it.
    fleet.start(0)
    bg_gate.touch()
    final = finishing.wait(background.process_id, timeout=60)
    assert (final.status, final.exit_code) == ("exited", 7)
    assert final.process_id == background.process_id
