"""What the auditor's CLI says about a receipt file overwritten with something that is no
receipt at all: a precise error naming the receipt, without quoting the file, and a
failing ``verify``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures_workers import sbx, settings_for
from worker.client import SandboxClient

PLANTED = "planted-text-not-for-the-reader"


def test_a_garbage_receipt_is_reported_precisely(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    with SandboxClient(session_id="garbled", settings=settings_for(sbx_home, None)) as c:
        pid = c.start("echo hi").process_id
        c.wait(pid, timeout=60)
        env = {"SBX_SESSION_ID": "garbled", "SBX_SESSION_TOKEN": c.session_token}
    path = sbx_home / "logs" / "process-results" / f"{pid}.json"
    path.write_text(json.dumps({"process_id": pid, "output": PLANTED}))
    shown = sbx(sbx_home, "receipts", "show", pid, **env)
    said = shown.stdout + shown.stderr
    assert shown.returncode == 1 and f"receipt of {pid} is unreadable" in said, said
    assert PLANTED not in said and "ValidationError" not in said
    verified = sbx(sbx_home, "receipts", "verify", "--json", **env)
    assert verified.returncode == 1
    assert json.loads(verified.stdout)["ok"] is False
