"""A sandbox attacking its own processes' spool (output and status files), from inside
the real bubblewrap jail: nothing it plants there blocks the worker, costs a receipt,
or lets a running process escape tracking.

The session's process files live in a directory the jail writes (``…/proc``), so
every attack here is a command run in the jail -- the process itself or the
session's shell -- and the test asserts the worker's side does not fall for it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from process_registry.models import OutputUnreadable
from process_registry.table import ProcessTable
from tests.fixtures_backends import require_jail
from tests.helpers import wait_until
from tests.unit.process_registry.test_adoption import checkpoint, dead_writer

OWNER = "s-owner"
OTHER = "s-other"
NOT_REGULAR = "it is not a regular file (a FIFO, socket or device)"

# Hang guard: before the fix the worker's exit-watcher thread (or the test's own
# thread) blocks forever in open(); pytest-timeout turns that into a failure.
pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def _jail() -> None:
    require_jail()


@pytest.fixture
def other_env(tmp_path: Path) -> Iterator[LocalEnvironment]:
    """Another session's sandbox, watched by the same table (the same exit watcher)."""
    work = tmp_path / "other"
    work.mkdir()
    e = LocalEnvironment(OTHER, LocalConfig(cwd=str(work), kill_grace=0.5))
    yield e
    e.close()


def proc_dir(env: LocalEnvironment) -> str:
    assert env.jail is not None
    return str(env.jail.dirs.proc)


def run(env: LocalEnvironment, command: str) -> str:
    """``command`` in the session's shell (in the jail); its output, checked for success."""
    result = env.exec(command, timeout=60)
    assert result.exit_code == 0, result.output
    return result.output


def is_fifo(path: str) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def others_still_complete(table: ProcessTable, other_env: LocalEnvironment) -> None:
    """A process of another session still ends, gets its receipt and its output."""
    rec = table.start(other_env, "echo fine; exit 4", owner_session_id=OTHER)
    info = table.wait(rec.process_id, OTHER, timeout=60)
    assert (info.status, info.exit_code) == ("exited", 4)
    assert table.receipts.read(rec.process_id, OTHER).output == "fine\n"


def receipts_of(home: Path, process_id: str) -> list[str]:
    return [n for n in os.listdir(home / "logs" / "process-results") if n.startswith(process_id)]


def test_a_fifo_for_its_output_file_blocks_no_completion(
    table: ProcessTable, env: LocalEnvironment, other_env: LocalEnvironment, home: Path
) -> None:
    # The process swaps its own output file for a FIFO, then ends.
    rec = table.start(
        env,
        f'cd {proc_dir(env)} && for f in *.out; do mkfifo x && mv -f x "$f"; done; exit 3',
        owner_session_id=OWNER,
    )
    info = table.wait(rec.process_id, OWNER, timeout=60)
    assert is_fifo(rec.output_path)
    assert (info.status, info.exit_code) == ("exited", 3)
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert receipt.output == f"[output unreadable: {NOT_REGULAR}]"
    assert receipt.output_bytes == 0
    others_still_complete(table, other_env)


def test_a_fifo_for_its_status_file_blocks_no_kill_nor_completion(
    table: ProcessTable, env: LocalEnvironment, other_env: LocalEnvironment
) -> None:
    rec = table.start(env, "echo up; exec sleep 300", owner_session_id=OWNER)
    # The kill must come after the echo, or the receipt rightly holds nothing.
    wait_until(lambda: "up" in table.log(rec.process_id, OWNER).text, 60, "output")
    run(env, f"mkfifo {rec.status_path}")  # from the session's shell, while it runs
    assert table.kill(rec.process_id, OWNER).status == "killed"
    info = table.wait(rec.process_id, OWNER, timeout=60)
    assert info.status == "killed"
    assert table.receipts.read(rec.process_id, OWNER).output == "up\n"
    others_still_complete(table, other_env)


def test_a_log_read_of_a_fifo_output_is_an_error_not_a_hang(
    table: ProcessTable, env: LocalEnvironment, other_env: LocalEnvironment
) -> None:
    rec = table.start(env, "exec sleep 300", owner_session_id=OWNER)
    run(env, f"rm -f {rec.output_path} && mkfifo {rec.output_path}")
    with pytest.raises(OutputUnreadable, match="not a regular file"):
        table.log(rec.process_id, OWNER, 0, 100)
    assert table.poll(rec.process_id, OWNER).status == "running"
    assert table.kill(rec.process_id, OWNER).status == "killed"
    others_still_complete(table, other_env)


def test_a_symlink_for_its_output_file_still_gets_its_one_receipt(
    table: ProcessTable, env: LocalEnvironment, home: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    rec = table.start(
        env,
        f"echo secret-ish; while [ ! -e {gate} ]; do sleep 0.02; done; exit 6",
        owner_session_id=OWNER,
    )
    out = rec.output_path
    run(env, f"ln -s /nonexistent {out}.l && mv -f {out}.l {out}")
    assert os.path.islink(out)
    gate.touch()
    info = table.wait(rec.process_id, OWNER, timeout=60)
    assert (info.status, info.exit_code) == ("exited", 6)
    assert info.ended_at is not None
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert receipt.output == "[output unreadable: it was replaced by a symbolic link]"
    assert receipts_of(home, rec.process_id) == [f"{rec.process_id}.json"]
    assert table.receipts.verify([OWNER]) == []


def test_adoption_finalizes_past_a_fifo_output(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    # It ended while no worker ran, leaving a FIFO for its output file.
    rec = checkpoint(
        home, env, spool,
        f'cd {spool} && for f in *.out; do mkfifo x && mv -f x "$f"; done; exit 5',
        dead_writer(),
    )  # fmt: skip
    wait_until(lambda: not env.is_running(rec.spawned()), 60, "the process to end")
    assert is_fifo(rec.output_path)
    assert table.adopt_all().finalized == [rec.process_id]
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert (receipt.status, receipt.exit_code) == ("exited", 5)
    assert receipt.output.startswith("[output unreadable")


def test_a_forged_status_does_not_finalize_a_live_process(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    rec = checkpoint(home, env, spool, "echo up; exec sleep 300", dead_writer())
    # The session writes "exited 0" for its still-running process, then the worker restarts.
    run(env, f"echo 0 > {rec.status_path}")
    report = table.adopt_all()
    assert (report.adopted, report.finalized) == ([rec.process_id], [])
    assert table.poll(rec.process_id, OWNER).status == "running"
    assert table.kill(rec.process_id, OWNER).status == "killed"
    assert not env.is_running(rec.spawned())
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert (receipt.status, receipt.output) == ("killed", "up\n")
