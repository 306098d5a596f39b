"""A worker that comes back after its sessions were taken over (its presence lapsed: it was
paused, or cut off from the ledger) must not go on serving them: two workers never serve
one session at once."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import redis

from tests.fixtures_fleet import Fleet
from tests.helpers import wait_until
from worker.protocol.leases import LeaseBook
from worker.protocol.ledger import claim_key


def _run(fleet: Fleet, session: str, command: str, call_id: str | None = None) -> dict[str, Any]:
    client = fleet.client(session)
    answer: dict[str, Any] = json.loads(
        client.tool_call("terminal", {"command": command}, call_id=call_id)
    )
    return answer


def _served_by_one_of_two(
    fleet_of: Any, session: str, tmp_path: Path
) -> tuple[Fleet, redis.Redis, int]:
    """Two workers whose presence lapses within seconds, the ledger, and the index of the
    one serving ``session`` after its first call (``cd tmp_path``, ``MARK=kept``)."""
    fleet: Fleet = fleet_of(2, SBX_LOST_AFTER="3", SBX_HEARTBEAT_INTERVAL="0.3")
    first = _run(fleet, session, f"cd {tmp_path} && export MARK=kept")
    assert first["exit_code"] == 0, first
    holder = fleet.index_of(fleet.serving_pid(fleet.client(session)))
    return fleet, redis.Redis.from_url(fleet.broker_url), holder


def test_a_call_queued_on_a_worker_whose_lease_was_taken_never_runs_there(
    fleet_of: Any, tmp_path: Path
) -> None:
    session = "fleet-comeback"
    fleet, ledger, holder = _served_by_one_of_two(fleet_of, session, tmp_path)
    started, gate, marker = tmp_path / "started", tmp_path / "gate", tmp_path / "ran-late"
    answers: dict[str, dict[str, Any]] = {}

    def call(name: str, command: str, call_id: str) -> None:
        answers[name] = _run(fleet, session, command, call_id)

    running = threading.Thread(
        target=call,
        args=(
            "running",
            f"touch {started}; while [ ! -e {gate} ]; do sleep 0.1; done",
            "c-running",
        ),
    )
    running.start()
    wait_until(started.exists, 60, "the first call to start on its worker")
    queued = threading.Thread(
        target=call,
        args=("queued", f"cd / && export MARK=stale && echo ran > {marker}", "c-queued"),
    )
    queued.start()
    wait_until(
        lambda: bool(ledger.exists(claim_key("c-queued"))),
        60,
        "the second call to be taken in behind the first",
    )

    paused = fleet.workers[holder]
    assert paused is not None and paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        running.join(120)
        queued.join(120)
        assert answers["running"]["status"] == "lost", answers
        assert answers["queued"]["status"] == "lost", answers
        moved = _run(fleet, session, 'echo "$PWD:$MARK"')
        assert moved["output"] == f"{tmp_path}:kept\n", moved
        assert moved.get("session_moved") is True, moved
        gate.touch()
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # Stopping it gracefully lets it finish whatever it still means to run first.
    paused.proc.send_signal(signal.SIGTERM)
    assert paused.proc.wait(120) == 0
    assert not marker.exists(), "a call declared lost ran later, after its session moved"
    state = LeaseBook(ledger).state(session)
    assert state is not None and state.worker == fleet.worker_id(1 - holder), state
    assert (state.cwd, state.env.get("MARK")) == (str(tmp_path), "kept"), state
    after = _run(fleet, session, 'echo "$PWD:$MARK"')
    assert after["output"] == f"{tmp_path}:kept\n", after


def test_a_call_a_resumed_worker_takes_in_for_a_session_moved_meanwhile_is_handed_on(
    fleet_of: Any, tmp_path: Path
) -> None:
    session = "fleet-resumed"
    fleet, ledger, holder = _served_by_one_of_two(fleet_of, session, tmp_path)
    old_route = LeaseBook(ledger).route(session)
    assert old_route is not None
    paused = fleet.workers[holder]
    assert paused is not None and paused.proc is not None
    answers: dict[str, dict[str, Any]] = {}
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        moved = _run(fleet, session, 'echo "$PWD:$MARK"')  # once its presence lapsed
        assert moved.get("session_moved") is True, moved
        # A caller that still knows the old route sends its next call there.
        late = threading.Thread(
            target=lambda: answers.update(
                late=json.loads(
                    fleet.client(session).tool_call(
                        "terminal", {"command": 'echo "late:$PWD:$MARK"'}, queue=old_route,
                        call_id="c-late",
                    )
                )
            )
        )
        late.start()
        wait_until(lambda: bool(ledger.llen(old_route)), 60, "the call to wait in that queue")
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    late.join(120)
    # The resumed worker takes it in, and gives it to the worker serving the session now.
    assert answers["late"]["output"] == f"late:{tmp_path}:kept\n", answers
    assert fleet.serving_pid(fleet.client(session)) == fleet.pid(1 - holder)
