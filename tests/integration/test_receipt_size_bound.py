"""A receipt file is read only up to what a receipt can hold: a huge (sparse) file planted
in ``process-results`` must not be read into the worker's memory by ``list`` or
``verify`` (one such file would make every session's listing allocate its size)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from worker.client import SandboxClient

HUGE = 1 << 30  # sparse: no disk used


def peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_huge_planted_receipt_file_is_not_read(sbx_home: Path, start_worker: Any) -> None:
    worker = start_worker(None)
    with SandboxClient(session_id="huge", settings=settings_for(sbx_home, None)) as c:
        pid = c.start("echo real").process_id
        c.wait(pid, timeout=60)
        before = peak_rss(worker.proc.pid)
        with open(sbx_home / "logs" / "process-results" / "phuge.json", "wb") as f:
            os.truncate(f.fileno(), HUGE)
        assert [r.process_id for r in c.receipts()] == [pid]
        assert c.verify_receipts() == []
        assert peak_rss(worker.proc.pid) - before < HUGE // 4
