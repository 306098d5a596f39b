"""Faults a worker must survive: duplicate deliveries, a worker killed mid-call, no worker."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient
from worker.protocol.ledger import claim_key
from worker.protocol.tasks import TOOL_CALL_TASK


def test_redelivered_call_runs_once(
    sbx_home: Path, broker_url: str | None, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(broker_url)
    settings = settings_for(sbx_home, broker_url)
    ledger_file = tmp_path / "runs"
    with SandboxClient(session_id="dup", settings=settings) as client:
        call_id = uuid.uuid4().hex
        message = client.call_message(
            "terminal", {"command": f"echo run >> {ledger_file}; echo done"}, call_id=call_id
        )
        # The same message delivered three times, as a broker redelivery would.
        for _ in range(3):
            client.app.send_task(TOOL_CALL_TASK, args=[message.model_dump()], task_id=call_id)
        result = json.loads(client.result(call_id, wait=60))
        assert result["output"] == "done\n"
        # A later call of the same session proves the duplicates were consumed first
        # (one queue, FIFO) and ignored.
        assert client.exec("echo after").output == "after\n"
        with SandboxClient(session_id="dup2", settings=settings) as other:
            other.exec("true")
    assert ledger_file.read_text() == "run\n"


def test_killed_worker_turns_the_call_into_lost(
    sbx_home: Path, broker_url: str | None, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(broker_url, SBX_LOST_AFTER="2", SBX_HEARTBEAT_INTERVAL="0.2")
    settings = settings_for(sbx_home, broker_url, lost_after=2.0)
    started = tmp_path / "started"
    with SandboxClient(session_id="victim", settings=settings) as client:
        import threading

        answer: list[str] = []
        t = threading.Thread(
            target=lambda: answer.append(
                client.tool_call("terminal", {"command": f"touch {started}; sleep 120"})
            )
        )
        t.start()
        wait_until(started.exists, 60, "the command to start")
        assert client.ledger.client.exists(claim_key_for_running(client)) == 1
        worker.stop(signal.SIGKILL)
        t.join(timeout=120)
        assert not t.is_alive()
    result = json.loads(answer[0])
    assert result["status"] == "lost"
    assert "died" in result["error"]


def claim_key_for_running(client: SandboxClient) -> str:
    running = client.ledger.running_calls()
    assert len(running) == 1, running
    return claim_key(next(iter(running)))


def test_no_worker_answers_pending_not_forever(sbx_home: Path, broker_url: str | None) -> None:
    settings = settings_for(sbx_home, broker_url, secret_key="k" * 32)
    with SandboxClient(session_id="alone", settings=settings) as client:
        result = json.loads(client.tool_call("terminal", {"command": "echo hi"}, wait=0.5))
    assert result["status"] == "pending"
    assert "sbx worker" in result["error"]


def test_cancel_a_running_call(
    sbx_home: Path, broker_url: str | None, start_worker: Any, tmp_path: Path
) -> None:
    import threading

    start_worker(broker_url, SBX_HEARTBEAT_INTERVAL="0.2")
    started = tmp_path / "started"
    with SandboxClient(session_id="cancel", settings=settings_for(sbx_home, broker_url)) as client:
        answer: list[str] = []
        call_id = uuid.uuid4().hex
        command = {"command": f"touch {started}; sleep 600", "timeout": 900}
        t = threading.Thread(
            target=lambda: answer.append(client.tool_call("terminal", command, call_id=call_id))
        )
        t.start()
        wait_until(started.exists, 60, "the command to start")
        client.cancel(call_id)
        t.join(timeout=120)
        assert not t.is_alive()
        result = json.loads(answer[0])
        assert (result["exit_code"], "cancelled" in result["error"]) == (130, True)
        assert client.exec("echo next").output == "next\n"


def test_cancel_a_queued_call_never_runs_it(
    sbx_home: Path, broker_url: str | None, start_worker: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    settings = settings_for(sbx_home, broker_url, secret_key="q" * 32)
    with SandboxClient(session_id="queued", settings=settings) as client:
        call_id = uuid.uuid4().hex
        pending = json.loads(
            client.tool_call("terminal", {"command": f"touch {marker}"}, wait=0.2, call_id=call_id)
        )
        assert pending["status"] == "pending"
        client.cancel(call_id)
        start_worker(broker_url, SBX_SECRET_KEY="q" * 32)
        result = json.loads(client.result(call_id, wait=60))
    assert result["status"] == "cancelled"
    assert not marker.exists()
