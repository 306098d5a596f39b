"""A worker stopping gracefully (SIGTERM) holds only the sessions it still runs calls of:
an idle session's next call moves to another worker at once, not after the grace."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from worker.client import SandboxClient


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def test_an_idle_sessions_call_moves_at_once_while_its_worker_drains(
    fleet_of: Any, tmp_path: Path
) -> None:
    fleet: Fleet = fleet_of(2, SBX_SHUTDOWN_GRACE="60")
    other = fleet.workers[1]
    assert other is not None
    other.stop()  # both sessions start on worker 0; worker 1 comes back below
    busy, idle = fleet.client("stopping-busy"), fleet.client("stopping-idle")
    assert run(busy, "true")["exit_code"] == 0
    assert run(idle, f"cd {tmp_path} && export KEPT=yes")["exit_code"] == 0
    fleet.start(1)
    started, gate = tmp_path / "started", tmp_path / "gate"
    answers: dict[str, dict[str, Any]] = {}
    running = threading.Thread(
        target=lambda: answers.update(
            busy=run(busy, f"touch {started}; while [ ! -e {gate} ]; do sleep 0.1; done")
        )
    )
    running.start()
    wait_until(started.exists, 60, "the busy session's call to start")
    leaving = fleet.workers[0]
    assert leaving is not None and leaving.proc is not None
    leaving.proc.send_signal(signal.SIGTERM)
    # Its consumer closed: a call sent now can no longer be taken in by worker 0 (in the
    # moment after the signal it still could, and would run the idle session's call there).
    wait_until(lambda: "takes no more calls" in leaving.log(), 60, "worker 0 to stop taking calls")
    try:
        # The idle session's call is answered while the busy one still runs on worker 0.
        moved = run(idle, 'echo "$PWD:$KEPT"')
    finally:
        gate.touch()
    running.join(180)
    assert moved["output"] == f"{tmp_path}:yes\n", moved
    assert moved.get("session_moved") is True, moved
    assert fleet.serving_pid(idle) == fleet.pid(1)
    assert answers["busy"]["exit_code"] == 0, answers  # finished within the grace
    assert leaving.proc.wait(120) == 0
    ledger = redis.Redis.from_url(fleet.broker_url, decode_responses=True)
    assert ledger.get("sbx:lease:stopping-busy") is None  # given up once it finished
