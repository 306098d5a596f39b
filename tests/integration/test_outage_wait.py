"""A waiting client rides out a broker outage until its own deadline, however long.

A real redis-server, SIGKILLed and restarted on the same port, and a real
``sbx worker``. The client waits in slices (it checks between them that its
call still goes to the right worker); an outage longer than one slice must not
end the whole wait.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import RedisProcess, call_in_background, held_command, wait_until
from worker.broker.sender import REROUTE_CHECK_S
from worker.client import SandboxClient


def test_a_waiting_client_outlasts_an_outage_longer_than_its_reroute_check(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(own_redis.url)
    started, go, command = held_command(tmp_path, "finished")
    # A new session: its first call goes to the shared queue, where a broker restarted
    # empty still sends it (no re-send: that is another matter, docs/fleet.md).
    with SandboxClient(session_id="outage", settings=settings_for(sbx_home, own_redis.url)) as c:
        t, outcome = call_in_background(c, command, wait=300)
        wait_until(started.exists, 60, "the command to start")
        own_redis.kill()
        killed_at = time.monotonic()
        go.touch()
        wait_until(lambda: "holding the result" in worker.log(), 60, "the worker to hold it")
        # The outage must outlast one slice of the client's wait (and a reconnect backoff)
        # for the client to have given up under the old behaviour.
        wait_until(
            lambda: time.monotonic() > killed_at + 2 * REROUTE_CHECK_S + 1.0,
            60,
            "an outage longer than a reroute check",
        )
        assert t.is_alive(), f"the client gave up during the outage: {outcome}"
        own_redis.start()
        t.join(timeout=120)
        assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], str), outcome
    result = json.loads(outcome[0])
    assert (result["output"], result["exit_code"]) == ("finished\n", 0)


def test_a_call_seen_claimed_is_not_sent_again_after_the_ledger_restarts_empty(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(own_redis.url)
    runs = tmp_path / "runs"
    started, go, command = held_command(tmp_path, "finished", before=f"echo run >> {runs}; ")
    with SandboxClient(session_id="resend", settings=settings_for(sbx_home, own_redis.url)) as c:
        # The session's calls now go to its worker's own queue; after the restart the
        # ledger no longer says so, and names the shared queue instead.
        assert c.exec("true").exit_code == 0
        seen_claimed = threading.Event()
        claimed = c.sender.ledger.claimed

        def noting(call_id: str) -> bool:
            answer = claimed(call_id)
            if answer:
                seen_claimed.set()
            return answer

        c.sender.ledger.claimed = noting  # type: ignore[method-assign]
        # Each slice of the client's wait starts here; between two slices it decides
        # whether to send the call again.
        slices: list[float] = []
        wait_slice = c.sender._wait

        def counting(*args: Any, **kwargs: Any) -> Any:
            slices.append(time.monotonic())
            return wait_slice(*args, **kwargs)

        c.sender._wait = counting  # type: ignore[method-assign]
        t, outcome = call_in_background(c, command, wait=300)
        wait_until(started.exists, 60, "the command to start")
        wait_until(seen_claimed.is_set, 60, "the client to see the call claimed")
        own_redis.kill()
        own_redis.start()  # empty: the call's claim and the session's lease are gone
        restarted = len(slices)
        # Two more slices: the client decided after a slice that began with the ledger
        # empty whether to send the call again (it used to: "unclaimed", and the ledger
        # names the shared queue, no longer the worker's own).
        wait_until(lambda: len(slices) >= restarted + 2, 60, "the client to check again")
        go.touch()
        t.join(timeout=120)
        assert not t.is_alive()
        # Calls of a session run in the order they came: a copy sent again before this
        # call would have run before it.
        assert c.exec("echo after").output == "after\n"
    assert len(outcome) == 1 and isinstance(outcome[0], str), outcome
    assert json.loads(outcome[0])["output"] == "finished\n"
    assert runs.read_text() == "run\n", "the command ran more than once"
