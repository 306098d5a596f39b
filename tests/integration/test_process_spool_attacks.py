"""A sandbox attacking its processes' spool files through a real ``sbx worker``: nothing
it plants freezes the worker for other sessions, costs a receipt, or frees a running
process from tracking across a worker restart.

Every attack runs inside the session's jail: a background process finds its own output
file through its stdout (``/proc/$$/fd/1``) and replaces it, or forges its status file.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_backends import require_jail
from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient

# Hang guard: before the fix a worker thread blocks forever and the calls below wait
# for answers that never come; pytest-timeout turns that into a failure.
pytestmark = [pytest.mark.timeout(240)]

OWN_OUTPUT = "out=$(readlink /proc/$$/fd/1); "
"""Shell prefix: ``$out`` is the process's own output file, as the jail sees it."""


@pytest.fixture(autouse=True)
def _jail() -> None:
    require_jail()


def client(home: Path, session: str, broker_url: str | None) -> SandboxClient:
    return SandboxClient(session_id=session, settings=settings_for(home, broker_url))


def test_a_fifo_for_an_output_file_freezes_no_other_session(
    sbx_home: Path, broker_url: str | None, start_worker: Any
) -> None:
    start_worker(broker_url)
    with client(sbx_home, "attacker", broker_url) as a, client(sbx_home, "victim", broker_url) as v:
        bad = a.start(OWN_OUTPUT + 'mkfifo "$out.x" && mv -f "$out.x" "$out"; exit 3')
        done = a.wait(bad.process_id, timeout=60)
        assert (done.status, done.exit_code) == ("exited", 3)
        receipt = a.receipt(bad.process_id)
        assert receipt.output.startswith("[output unreadable: it is not a regular file")
        good = v.start("echo done; exit 4")
        info = v.wait(good.process_id, timeout=60)
        assert (info.status, info.exit_code) == ("exited", 4)
        assert v.receipt(good.process_id).output == "done\n"


def test_read_file_of_a_fifo_answers_invalid_and_the_worker_goes_on(
    sbx_home: Path, broker_url: str | None, start_worker: Any
) -> None:
    start_worker(broker_url)
    with client(sbx_home, "reader", broker_url) as c:
        assert c.exec("mkfifo /tmp/f").exit_code == 0
        answer = json.loads(c.tool_call("read_file", {"path": "/tmp/f"}))
        assert answer["status"] == "invalid", answer
        assert "not a regular file" in answer["error"]
        assert c.exec("echo still here").output == "still here\n"


def test_a_symlink_for_an_output_file_still_leaves_one_receipt(
    sbx_home: Path, broker_url: str | None, start_worker: Any
) -> None:
    start_worker(broker_url)
    with client(sbx_home, "linker", broker_url) as c:
        p = c.start(OWN_OUTPUT + 'ln -s /nonexistent "$out.l" && mv -f "$out.l" "$out"; exit 2')
        info = c.wait(p.process_id, timeout=60)
        assert (info.status, info.exit_code) == ("exited", 2)
        assert info.ended_at is not None
        receipt = c.receipt(p.process_id)
        assert receipt.output == "[output unreadable: it was replaced by a symbolic link]"
        assert c.verify_receipts() == []
    results = os.listdir(sbx_home / "logs" / "process-results")
    assert [n for n in results if n.startswith(p.process_id)] == [f"{p.process_id}.json"]


def test_a_forged_status_does_not_free_a_running_process_across_a_restart(
    sbx_home: Path, broker_url: str | None, start_worker: Any
) -> None:
    worker = start_worker(broker_url)
    with client(sbx_home, "forger", broker_url) as c:
        p = c.start(OWN_OUTPUT + 'echo 0 > "${out%.out}.status"; echo forged; exec sleep 300')
        wait_until(lambda: c.logs(p.process_id).text == "forged\n", 60, "the status forged")
        worker.stop(signal.SIGKILL)
        start_worker(broker_url)
        info = c.poll(p.process_id)
        assert (info.status, info.exit_code) == ("running", None)
        assert c.kill(p.process_id).status == "killed"
        receipt = c.receipt(p.process_id)
        assert receipt.status == "killed" and receipt.exit_code != 0  # not the forged 0
    assert not os.path.exists(f"/proc/{p.pid}") or _zombie(p.pid)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
