"""Process actions that reach a worker not holding the process: forwarded to the holder.

Two real worker processes share the embedded broker and ``SBX_HOME``. Calls are
sent to a chosen worker's own queue, as a platform publishing without sbx's
client routing could land on either.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import WorkerProcess
from worker.client import SandboxClient
from worker.protocol.ledger import route_key
from worker.protocol.tasks import own_queue_name


def own_queue(home: Path, worker: WorkerProcess) -> str:
    assert worker.proc is not None
    return own_queue_name(settings_for(home, None).queue, socket.gethostname(), worker.proc.pid)


def call(client: SandboxClient, queue: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(client.tool_call(tool, args, queue=queue))
    return answer


def test_actions_and_lists_reach_the_holding_worker(sbx_home: Path, start_worker: Any) -> None:
    a, b = start_worker(None), start_worker(None)
    qa, qb = own_queue(sbx_home, a), own_queue(sbx_home, b)
    settings = settings_for(sbx_home, None)
    with SandboxClient(session_id="fwd", settings=settings) as c:
        on_a = call(c, qa, "terminal", {"command": "exec sleep 300", "background": True})
        on_b = call(c, qb, "terminal", {"command": "exec sleep 300", "background": True})
        pa, pb = on_a["process_id"], on_b["process_id"]
        # B does not hold pa and no receipt exists yet: only A can say it runs.
        polled = call(c, qb, "process", {"action": "poll", "process_id": pa})
        assert (polled["status"], polled["pid"]) == ("running", on_a["pid"])
        for queue in (qa, qb):
            listed = call(c, queue, "process", {"action": "list"})
            assert sorted(p["process_id"] for p in listed["processes"]) == sorted([pa, pb])
        # Another session's process answers through B as an unknown id does (issue 12).
        with SandboxClient(session_id="intruder", settings=settings) as other:
            denied = call(other, qb, "process", {"action": "kill", "process_id": pa})
            unknown = call(other, qb, "process", {"action": "kill", "process_id": "p" + "0" * 16})
            assert denied["status"] == "not_found"
            assert denied == {**unknown, "error": unknown["error"].replace("p" + "0" * 16, pa)}
            assert call(other, qb, "process", {"action": "list"})["processes"] == []
        killed = call(c, qb, "process", {"action": "kill", "process_id": pa})
        assert killed["status"] == "killed"
        # Finished: its route is gone and B answers from the shared receipts.
        assert c.ledger.client.exists(route_key(pa)) == 0
        assert call(c, qb, "process", {"action": "poll", "process_id": pa})["status"] == "killed"
        assert call(c, qa, "process", {"action": "kill", "process_id": pb})["status"] == "killed"


def test_a_route_to_a_gone_worker_answers_an_error_and_the_action_never_runs(
    sbx_home: Path, start_worker: Any
) -> None:
    worker = start_worker(None)
    queue = own_queue(sbx_home, worker)
    settings = settings_for(sbx_home, None)
    gone = f"{settings.queue}.w.gone-host.1"
    with SandboxClient(session_id="stale", settings=settings) as c:
        c.ledger.client.set(route_key("p-stale"), json.dumps({"queue": gone, "session": "stale"}))
        answer = call(c, queue, "process", {"action": "kill", "process_id": "p-stale"})
        assert answer["status"] == "error" and "did not answer" in answer["error"]
        # The forwarded kill waits in the gone worker's queue, cancelled: it can never run.
        queued = [json.loads(m) for m in c.ledger.client.lrange(gone, 0, -1)]
        assert len(queued) == 1
        forwarded_id = queued[0]["headers"]["id"]
        assert c.ledger.client.exists(f"sbx:call:{forwarded_id}:cancel") == 1
