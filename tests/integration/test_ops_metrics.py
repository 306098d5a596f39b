"""Prometheus metrics scraped from a real worker: what each call, sandbox, process and
approval counts, and that no label ever carries a session id, call id, command or secret."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psutil

from tests.fixtures_workers import settings_for
from tests.helpers import free_port, wait_until
from tests.ops_support import scrape, value
from worker.client import SandboxClient
from worker.service.metrics import APPROVAL_DECISIONS, CALL_STATUSES

SECRET = "sk-proj-" + "Zq7" * 12  # a key the redactor recognises
MARKER = "metrics-output-marker-4711"


def test_a_scraped_worker_counts_calls_sandboxes_processes_and_approvals(
    sbx_home: Path, start_worker: Any
) -> None:
    port = free_port()
    worker = start_worker(None, SBX_METRICS_ADDR=str(port))  # a bare port: loopback
    session = f"metrics-{uuid.uuid4().hex}"
    call_ids: list[str] = []
    with SandboxClient(session_id=session, settings=settings_for(sbx_home, None)) as client:

        def call(command: str) -> dict[str, Any]:
            call_ids.append(uuid.uuid4().hex)
            raw = client.tool_call("terminal", {"command": command}, call_id=call_ids[-1])
            answer: dict[str, Any] = json.loads(raw)
            return answer

        ran = call(f"export API_KEY={SECRET}; echo {MARKER} $API_KEY")
        assert ran["exit_code"] == 0 and MARKER in ran["output"] and SECRET not in ran["output"]
        refused = call("chmod 777 /etc/passwd")
        assert refused["status"] == "approval_required"
        pending = scrape(port)
        started = client.start(f"echo {MARKER}; exit 3")
        assert client.wait(started.process_id, timeout=60).exit_code == 3
        assert client.deny(refused["approval_id"]).status == "denied"

    wait_until(lambda: value(scrape(port), "sbx_receipts_written_total") == 1, 30, "the receipt")
    samples = scrape(port)
    # Calls: two terminal calls (one ran, one refused) and the background start.
    assert value(samples, "sbx_calls_total", tool="terminal", status="ok", backend="local") == 2
    assert value(samples, "sbx_calls_total", tool="terminal", status="approval_required",
                 backend="local") == 1  # fmt: skip
    assert value(samples, "sbx_call_duration_seconds_count", backend="local") >= 3
    assert value(samples, "sbx_call_queue_wait_seconds_count") >= 3
    assert value(samples, "sbx_sandboxes_created_total", backend="local") == 1
    assert value(samples, "sbx_sandbox_create_seconds_count", backend="local") == 1
    assert value(samples, "sbx_sandboxes_live", backend="local") == 1
    assert value(samples, "sbx_leases_held") == 1
    assert value(samples, "sbx_processes_running") == 0
    assert value(pending, "sbx_approvals_pending") == 1
    assert value(samples, "sbx_approvals_pending") == 0
    assert value(samples, "sbx_approvals_total", decision="required") == 1
    assert value(samples, "sbx_approvals_total", decision="denied") == 1
    redactions = [v for (name, _), v in samples.items() if name == "sbx_redactions_total"]
    assert sum(redactions) >= 1
    assert value(samples, "sbx_broker_reconnects_total") == 0
    assert value(samples, "process_resident_memory_bytes") > 0

    # Labels come from closed sets: nothing a caller chose, no secret, no id.
    allowed = {"terminal", "process", "other", "local", "ok", *CALL_STATUSES,
               *APPROVAL_DECISIONS}  # fmt: skip
    forbidden = [session, SECRET, MARKER, "chmod", "API_KEY", refused["approval_id"], *call_ids]
    for (name, labels), _ in samples.items():
        for key, label in labels:
            assert not any(f in label for f in forbidden), (name, key, label)
            if name.startswith("sbx_") and key not in ("le", "rule"):
                assert label in allowed, (name, key, label)

    # Loopback only when no host is given.
    listening = [c.laddr for c in psutil.Process(worker.proc.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]  # fmt: skip
    assert [a.ip for a in listening] == ["127.0.0.1"]


def test_metrics_are_off_unless_asked_for(sbx_home: Path, start_worker: Any) -> None:
    worker = start_worker(None)
    listening = [c for c in psutil.Process(worker.proc.pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN]  # fmt: skip
    assert listening == []
