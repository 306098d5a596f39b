"""The approval policy changes in a running worker only on the operator's signal
(SIGHUP), and a loosening is logged with what loosened."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient


def test_sighup_reloads_the_policy_and_logs_what_loosened(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    worker = start_worker(None)
    (tmp_path / "d").mkdir()
    command = f"cd {tmp_path} && rm -rf d"
    with SandboxClient(session_id="reload", settings=settings_for(sbx_home, None)) as c:
        (sbx_home / "config.yaml").write_text("approvals: {mode: off}\n")
        first = json.loads(c.tool_call("terminal", {"command": command}))
        assert first["status"] == "approval_required"  # a changed file alone: nothing
        worker.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "loosened on reload: mode manual -> off" in worker.log(), 60,
                   "the reload to be logged")  # fmt: skip
        second = json.loads(c.tool_call("terminal", {"command": command}))
        assert second["exit_code"] == 0 and not (tmp_path / "d").exists()
