"""Two real workers on one ``SBX_HOME`` (one host): when the one holding a session's
local background processes dies, the other adopts them -- it need not be restarted."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import WorkerProcess, wait_until
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient
from worker.protocol.ledger import read_route

FAST = {"SBX_LOST_AFTER": "2", "SBX_HEARTBEAT_INTERVAL": "0.3"}


def ready(worker: WorkerProcess) -> WorkerProcess:
    """``worker`` once it finished starting (adoption included): a ping may be answered by
    the other worker of the home."""
    wait_until(lambda: "ready on" in worker.log(), 120, "the worker to be ready")
    return worker


def test_a_coworker_on_the_same_home_adopts_a_dead_workers_processes(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    workers = [ready(start_worker(None, **FAST)), ready(start_worker(None, **FAST))]
    gate = tmp_path / "gate"
    settings = settings_for(sbx_home, None)
    with SandboxClient(session_id="cowork", settings=settings) as c:
        codes = {
            c.start(
                f"while [ ! -e {gate} ]; do sleep 0.05; done; echo ran{i}; exit {i + 3}"
            ).process_id: i + 3
            for i in range(4)
        }
        ledger = EmbeddedBroker(sbx_home).client()
        holders = set()
        for process_id in codes:
            route = read_route(ledger, process_id)
            assert route is not None, process_id
            holders.add(int(route["worker"].rpartition(":")[2]))
        (holder,) = holders  # one session's calls go to the worker holding its shell
        dead = next(w for w in workers if w.proc is not None and w.proc.pid == holder)
        dead.stop(signal.SIGKILL)
        gate.touch()
        for process_id, code in codes.items():
            answer = json.loads(
                c.tool_call("process", {"action": "wait", "process_id": process_id, "timeout": 90})
            )
            assert (answer.get("status"), answer.get("exit_code")) == ("exited", code), answer
            receipt = c.receipt(process_id)
            assert (receipt.status, receipt.exit_code) == ("exited", code)
            assert receipt.output == f"ran{code - 3}\n"
        assert sorted(r.process_id for r in c.receipts()) == sorted(codes)
        assert c.verify_receipts() == []
    wait_until(
        lambda: not list((sbx_home / "checkpoints").glob("*.json")), 60, "checkpoints removed"
    )
