"""Adoption at worker start: PID-safe, never signals a mismatch, true exit status or `lost`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.procinfo import boot_id, process_start_time
from process_registry.checkpoints import CheckpointStore, adoptable
from process_registry.models import PermissionDenied, ProcessRecord, WriterIdentity
from process_registry.table import ProcessTable
from tests.helpers import wait_until

OWNER = "s-owner"
REPO = Path(__file__).resolve().parents[3]


def dead_writer() -> WriterIdentity:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return WriterIdentity(pid=proc.pid, start_time=1, host=socket.gethostname())


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process whose pid a stale checkpoint may name."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def checkpoint(
    home: Path,
    env: LocalEnvironment,
    spool: Path,
    command: str,
    writer: WriterIdentity,
    **kw: object,
) -> ProcessRecord:
    spool.mkdir(mode=0o700, exist_ok=True)
    pid = f"p{abs(hash(command)) % 10**12:012d}"
    spawned = env.spawn(
        command, output_path=str(spool / f"{pid}.out"), status_path=str(spool / f"{pid}.status")
    )
    fields: dict[str, object] = {
        "process_id": pid,
        "pid": spawned.pid,
        "pgid": spawned.pgid,
        "pid_start_time": spawned.start_time,
        "boot_id": boot_id(),
        "writer": writer,
        "owner_session_id": OWNER,
        "backend": "local",
        "sandbox_id": env.sandbox_id,
        "command": command,
        "cwd": None,
        "output_path": spawned.output_path,
        "status_path": spawned.status_path,
        "started_at": time.time(),
    }
    fields.update(kw)
    record = ProcessRecord.model_validate(fields)
    return CheckpointStore(home, me=writer).write(record)


def test_live_process_of_dead_writer_is_adopted(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    rec = checkpoint(home, env, spool, "echo adopted; exec sleep 30", dead_writer())
    # It has written its line (a loaded machine may not have run it yet) before it is killed.
    wait_until(lambda: Path(rec.output_path).read_bytes() == b"adopted\n", 60, "its output")
    report = table.adopt_all()
    assert report.adopted == [rec.process_id]
    assert table.poll(rec.process_id, OWNER).status == "running"
    assert CheckpointStore(home).load(rec.process_id).writer == table.checkpoints.me  # type: ignore[union-attr]
    info = table.kill(rec.process_id, OWNER)
    assert info.status == "killed"
    assert not env.is_running(rec.spawned())
    assert table.receipts.read(rec.process_id, OWNER).output == "adopted\n"


def test_checkpoint_of_live_writer_is_left_alone(
    table: ProcessTable,
    env: LocalEnvironment,
    home: Path,
    spool: Path,
    stranger: subprocess.Popen[bytes],
) -> None:
    alive = WriterIdentity(
        pid=stranger.pid, start_time=process_start_time(stranger.pid), host=socket.gethostname()
    )
    rec = checkpoint(home, env, spool, "exec sleep 30", alive)
    report = table.adopt_all()
    assert rec.process_id in report.skipped
    assert env.is_running(rec.spawned())
    with pytest.raises(PermissionDenied):  # a producer never rewrites another's checkpoint
        table.checkpoints.write(rec)
    os.killpg(rec.pgid, signal.SIGKILL)


def test_recycled_pid_is_not_adopted_nor_signalled(
    table: ProcessTable,
    env: LocalEnvironment,
    home: Path,
    spool: Path,
    stranger: subprocess.Popen[bytes],
) -> None:
    real_start = process_start_time(stranger.pid)
    assert real_start is not None
    record = ProcessRecord(
        process_id="precycled",
        pid=stranger.pid,
        pgid=stranger.pid,
        pid_start_time=real_start + 1,  # the pid now names another process
        boot_id=boot_id(),
        writer=dead_writer(),
        owner_session_id=OWNER,
        backend="local",
        sandbox_id="local:x",
        command="sleep 60",
        cwd=None,
        output_path=str(spool / "nope.out"),
        status_path=str(spool / "nope.status"),
        started_at=time.time(),
    )
    CheckpointStore(home, me=record.writer).write(record)
    assert adoptable(record).action == "finalize"
    report = table.adopt_all()
    assert report.finalized == ["precycled"] and report.adopted == []
    receipt = table.receipts.read("precycled", OWNER)
    assert (receipt.status, receipt.exit_code) == ("lost", None)
    assert stranger.poll() is None  # still running: never signalled
    assert not (home / "checkpoints" / "precycled.json").exists()


def test_other_boot_is_not_adopted_nor_signalled(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    rec = checkpoint(home, env, spool, "exec sleep 30", dead_writer(), boot_id="another-boot")
    assert table.adopt_all().finalized == [rec.process_id]
    assert env.is_running(rec.spawned())
    os.killpg(rec.pgid, signal.SIGKILL)


def test_process_that_ended_while_down_gets_true_status(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    rec = checkpoint(home, env, spool, "echo bye; exit 7", dead_writer())
    # Ended, not just its status written: the wrapper still runs a moment after that write
    # (a running process is adopted, not finalized).
    wait_until(lambda: not env.is_running(rec.spawned()), 60, "the process to end")
    assert table.adopt_all().finalized == [rec.process_id]
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert (receipt.status, receipt.exit_code, receipt.output) == ("exited", 7, "bye\n")


def test_unknown_status_is_lost_never_invented(
    table: ProcessTable, env: LocalEnvironment, home: Path, spool: Path
) -> None:
    rec = checkpoint(home, env, spool, "exit 9", dead_writer())
    # The scenario is "ended while no worker ran": the status file appears just before
    # the wrapper exits, so wait for the exit itself (the race that made this test flaky:
    # adopting the still-running wrapper finalized it later, after the receipt was read).
    wait_until(lambda: not env.is_running(rec.spawned()), 60, "the process to end")
    os.unlink(rec.status_path)
    table.adopt_all()
    receipt = table.receipts.read(rec.process_id, OWNER)
    assert (receipt.status, receipt.exit_code) == ("lost", None)


_WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from environments.backends.local.environment import LocalEnvironment
    from process_registry.table import ProcessTable
    from tests.unit.process_registry.test_adoption import jail_config
    home, spool, gate, state = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    # The gate's directory is bound into the jail; the jail's state outlives this process.
    env = LocalEnvironment("s-owner", jail_config(state, gate))
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool)
    for i in range(20):
        if i % 2:
            cmd = f"exit {{i}}"
        else:
            cmd = f"while [ ! -e {{gate}} ]; do sleep 0.02; done; echo out{{i}}; exit {{i}}"
        print(reg.start(env, cmd, owner_session_id="s-owner").process_id, i, flush=True)
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def jail_config(state: str, gate: str) -> LocalConfig:
    """The jail of the processes below: same state directory in both workers, the gate's
    directory visible inside."""
    return LocalConfig(state_dir=state, binds=(os.path.dirname(gate),))


def test_sigkilled_worker_processes_are_all_adopted_or_receipted(
    home: Path, tmp_path: Path, spool: Path
) -> None:
    gate = tmp_path / "gate"
    state = str(tmp_path / "jails")
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER.format(repo=str(REPO)), str(home), str(spool), str(gate),
         state],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    expected: dict[str, int] = {}
    for line in worker.stdout:
        if line.strip() == "ready":
            break
        process_id, index = line.split()
        expected[process_id] = int(index)
    worker.kill()
    worker.wait()
    assert len(expected) == 20
    env = LocalEnvironment(OWNER, jail_config(state, str(gate)))
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool)
    try:
        report = reg.adopt_all()
        handled = set(report.adopted) | set(report.finalized)
        receipted = {n[:-5] for n in os.listdir(home / "logs" / "process-results")}
        assert set(expected) <= handled | receipted
        gate.touch()
        for process_id, want in expected.items():
            info = reg.wait(process_id, OWNER, timeout=30)
            assert (info.status, info.exit_code) == ("exited", want), process_id
        assert reg.receipts.verify([OWNER]) == []
        wait_until(
            lambda: not [n for n in os.listdir(home / "checkpoints") if n.endswith(".json")],
            10,
            "checkpoints removed",
        )
        data = json.loads((home / "logs" / "process-results" / f"{min(expected)}.json").read_text())
        assert data["owner_session_id"] == OWNER
    finally:
        reg.close()
        env.close()
