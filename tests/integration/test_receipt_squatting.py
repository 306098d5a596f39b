"""A file planted where a process's receipt will be written must not suppress that receipt.

The session's own agent knows its process ids, and its sandbox may reach ``SBX_HOME``: it
can plant a symlink, FIFO or forged file at ``process-results/<id>.json`` before the
process ends. Receipts are written exclusively (one per process), so a writer that took
any file there for the receipt would leave the process without a record, and the chain
without a gap for ``verify`` to report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_attacks import attack, script
from tests.fixtures_workers import settings_for
from worker.client import SandboxClient

SQUAT = """
import os
target = os.path.join(ARGS["home"], "logs", "process-results", ARGS["pid"] + ".json")
try:
    if ARGS["kind"] == "symlink":
        os.symlink("/etc/hostname", target)
    elif ARGS["kind"] == "fifo":
        os.mkfifo(target, 0o600)
    else:
        with open(target, "w") as f:
            f.write('{"process_id": "' + ARGS["pid"] + '", "output": "nothing to see"}')
except OSError:
    report(reached=False)
report(reached=True)
"""


@pytest.mark.parametrize("kind", ["symlink", "fifo", "garbage"])
def test_a_planted_file_does_not_suppress_the_receipt(
    sbx_home: Path, start_worker: Any, tmp_path: Path, kind: str
) -> None:
    start_worker(None)
    gate = tmp_path / "gate"
    with SandboxClient(session_id="squat", settings=settings_for(sbx_home, None)) as c:
        c.wait(c.start("echo first").process_id, timeout=60)  # the directory exists
        pid = c.start(f"while [ ! -e {gate} ]; do sleep 0.05; done; echo evidence").process_id
        assert attack(c, script(SQUAT, home=str(sbx_home), pid=pid, kind=kind))["reached"]
        gate.touch()
        c.wait(pid, timeout=60)
        assert c.receipt(pid).output == "evidence\n"
        assert c.verify_receipts() == []
