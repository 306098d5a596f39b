"""The on-disk cap of background processes' output: real processes writing far past it.

Disk use is measured with ``st_blocks`` (what the file really occupies), never
with sizes: the file keeps its size (holes at its head), only its blocks go.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from environments.backends.local.environment import LocalEnvironment
from environments.base import OUTPUT_ALIGN, discard_boundary
from environments.procinfo import boot_id
from environments.shell import helper as scripts
from process_registry.checkpoints import CheckpointStore
from process_registry.models import ProcessRecord, WriterIdentity
from process_registry.output_cap import MIN_PROCESS_OUTPUT_CAP, lead_cut
from process_registry.table import ProcessTable
from tests.helpers import wait_until

OWNER = "s-owner"
MIB = 1 << 20
CAP = MIB
STEPS = 20
BOUND = CAP + 2 * OUTPUT_ALIGN
"""Disk use allowed after a sweep: the cap, plus block rounding and file-system metadata."""


def stream_bytes(n_bytes: int) -> bytes:
    """Deterministic lines with multibyte UTF-8 (cuts land inside sequences); n_bytes long."""
    lines: list[bytes] = []
    total = i = 0
    while total < n_bytes - 200:
        line = f"{i:08d} héllo wörld ✓ 𝄞 {'abcdefghij' * (i % 7)}\n".encode()
        lines.append(line)
        total += len(line)
        i += 1
    lines.append(b"=" * (n_bytes - total - 1) + b"\n")  # exactly n_bytes, ends a line
    return b"".join(lines)


STREAM = stream_bytes(STEPS * MIB)


def disk_bytes(path: str) -> int:
    return os.stat(path).st_blocks * 512


def has_size(path: str, size: int) -> Callable[[], bool]:
    return lambda: os.stat(path).st_size == size


@pytest.fixture
def capped(home: Path, env: LocalEnvironment, spool: Path) -> Iterator[ProcessTable]:
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool, kill_grace=1.0, output_cap=CAP)
    yield reg
    reg.close()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "stream.bin"
    path.write_bytes(STREAM)
    return path


def paced_command(source: Path, fifo: Path) -> str:
    """Writes ``source`` one MiB per line read from ``fifo`` (the test paces it).

    A read that meets end-of-file writes nothing: when the pacer is descheduled between
    writing its line and closing the FIFO, the next open still finds it open and its
    close reads as EOF -- that is no permission to write another MiB.
    """
    return (
        f"i=0; while [ $i -lt {STEPS} ]; do if read go < {fifo}; then "
        f"tail -c +$((i * {MIB} + 1)) {source} | head -c {MIB}; i=$((i + 1)); fi; done"
    )


def release(fifo: Path) -> None:
    """Let the paced writer write its next MiB (blocks until it waits for it)."""
    with open(fifo, "w") as f:
        f.write("go\n")


def read_all(reg: ProcessTable, process_id: str, offset: int = 0) -> tuple[int, bytes]:
    """(offset of the first byte, everything from there) by following ``next_offset``."""
    parts: list[bytes] = []
    first: int | None = None
    while True:
        chunk = reg.log(process_id, OWNER, offset, 65536)
        assert "\x00" not in chunk.text
        first = chunk.offset if first is None else first
        parts.append(chunk.text.encode())
        assert chunk.next_offset >= offset
        offset = chunk.next_offset
        if chunk.eof:
            return first, b"".join(parts)


def check_finished(reg: ProcessTable, home: Path, process_id: str, path: str) -> None:
    """Disk bounded; log, poll and receipt show only real bytes, the newest intact."""
    total = len(STREAM)
    gone = discard_boundary(total, CAP)
    assert gone > 0 and total - gone <= CAP
    assert disk_bytes(path) <= BOUND

    chunk = reg.log(process_id, OWNER, 0, 65536)
    assert chunk.discarded_before == gone
    # Starts at the first line start after the discarded head: no NUL of the hole,
    # no half line (a secret on it would be half shown), no split UTF-8 sequence.
    assert gone <= chunk.offset < gone + 4096 and STREAM[chunk.offset - 1 : chunk.offset] == b"\n"
    assert "\x00" not in chunk.text
    assert chunk.text.encode() == STREAM[chunk.offset : chunk.next_offset]
    first, body = read_all(reg, process_id)
    assert first == chunk.offset and body == STREAM[first:]  # the tail is intact, in order

    info = reg.poll(process_id, OWNER)
    assert (info.status, info.exit_code, info.output_bytes) == ("exited", 0, total)
    assert (info.output_cap, info.output_cap_enforced, info.output_discarded) == (CAP, True, gone)
    assert STREAM.decode().endswith(info.output_tail) and len(info.output_tail) > 1000

    data = json.loads((home / "logs" / "process-results" / f"{process_id}.json").read_text())
    assert data["output_bytes"] == total and data["output_truncated"] is True
    output: str = data["output"]
    assert "\x00" not in output
    marker, _, rest = output.partition("\n")
    assert marker == f"[... {first} earlier bytes discarded (process output cap) ...]"
    head, _, tail = rest.partition("\n... [")
    assert STREAM[first:].decode().startswith(head) and len(head) > 1000
    assert STREAM.decode().endswith(tail.partition("] ...\n")[2])


def test_discard_boundary_keeps_at_most_the_cap_in_whole_units() -> None:
    for size in (0, CAP, CAP + 1, CAP + OUTPUT_ALIGN, 3 * CAP + 12345, 10**12):
        cut = discard_boundary(size, CAP)
        assert cut % OUTPUT_ALIGN == 0 and cut <= size and size - cut <= CAP
        assert cut == 0 or size - cut > CAP - OUTPUT_ALIGN
        assert discard_boundary(size + 1, CAP) >= cut  # monotonic: readers rely on it
        assert discard_boundary(size, 0) == 0


def test_sandbox_scripts_use_the_same_boundary(tmp_path: Path) -> None:
    """The sh arithmetic of the remote helpers agrees with the Python formula (sparse files)."""
    path = tmp_path / "sparse.out"
    for size in (5, CAP, CAP + 1, 7 * CAP + 4097, 3 * 10**9 + 17):
        path.write_bytes(b"")
        os.truncate(path, size)
        out = subprocess.run(
            ["sh", "-c", scripts.READ_OUTPUT, "sbx", str(path), "0", "0", str(CAP),
             str(OUTPUT_ALIGN)],
            capture_output=True, check=True,
        ).stdout  # fmt: skip
        assert out == f"\nsbx-window {discard_boundary(size, CAP)} {size}\n".encode()


def test_lead_cut_never_starts_inside_a_line_or_a_sequence() -> None:
    data = "𝄞x\nnext".encode()[1:]  # starts with continuation bytes
    assert data[lead_cut(data, line=True) :] == b"next"
    assert data[lead_cut(data, line=False) :] == b"x\nnext"


def test_cap_setting_is_validated(home: Path, env: LocalEnvironment, spool: Path) -> None:
    with pytest.raises(ValueError, match="unlimited"):
        ProcessTable(home, lambda rec: env, spool_dir=spool, output_cap=4096)
    ProcessTable(home, lambda rec: env, spool_dir=spool, output_cap=0).close()
    ProcessTable(home, lambda rec: env, spool_dir=spool,
                    output_cap=MIN_PROCESS_OUTPUT_CAP).close()  # fmt: skip


def test_paced_writer_stays_bounded_while_it_runs(
    capped: ProcessTable, env: LocalEnvironment, home: Path, source: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "pace"
    os.mkfifo(fifo)
    rec = capped.start(env, paced_command(source, fifo), owner_session_id=OWNER)
    assert rec.output_cap == CAP  # checkpointed: an adopting worker keeps this process's cap
    path = rec.output_path
    for step in range(1, STEPS + 1):
        release(fifo)
        wait_until(has_size(path, step * MIB), 60, f"MiB {step} written")
        # The periodic sweep (not the end of the process) brings it back under the cap.
        wait_until(lambda: disk_bytes(path) <= BOUND, 60, f"disk use bounded after MiB {step}")
        if step == 5:
            chunk = capped.log(rec.process_id, OWNER, 0, 4096)
            assert chunk.discarded_before == discard_boundary(5 * MIB, CAP) > 0
            assert "\x00" not in chunk.text and chunk.status == "running"
            assert chunk.text.encode() == STREAM[chunk.offset : chunk.next_offset]
            assert capped.poll(rec.process_id, OWNER).output_cap_enforced is True
    assert capped.wait(rec.process_id, OWNER, timeout=60).status == "exited"
    check_finished(capped, home, rec.process_id, path)


def test_burst_is_bounded_by_the_final_sweep(
    capped: ProcessTable, env: LocalEnvironment, home: Path, source: Path
) -> None:
    """A process that writes everything at once and ends: the sweep at its end bounds it."""
    rec = capped.start(env, f"cat {source}", owner_session_id=OWNER)
    assert capped.wait(rec.process_id, OWNER, timeout=60).status == "exited"
    check_finished(capped, home, rec.process_id, rec.output_path)


def test_readers_racing_sweeps_never_see_the_hole(
    capped: ProcessTable, env: LocalEnvironment, source: Path
) -> None:
    """A follower that falls behind, and readers at stale offsets, while sweeps punch."""
    writer = f"while IFS= read -r line; do printf '%s\\n' \"$line\"; done < {source}"
    rec = capped.start(env, writer, owner_session_id=OWNER)
    offset = reads = moved = 0
    while True:
        ended = capped.poll(rec.process_id, OWNER).status != "running"
        for at in (0, offset):
            chunk = capped.log(rec.process_id, OWNER, at, 8192)
            assert "\x00" not in chunk.text
            assert chunk.text.encode() == STREAM[chunk.offset : chunk.next_offset]
            moved += chunk.offset > at
            reads += 1
        offset = chunk.next_offset
        if ended and chunk.eof:
            break
    assert reads > 10 and moved > 0
    assert capped.poll(rec.process_id, OWNER).output_bytes == len(STREAM)


def test_adopted_process_keeps_being_swept(
    capped: ProcessTable, env: LocalEnvironment, home: Path, spool: Path, source: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A process of a dead worker: its checkpointed cap is honoured by the adopting worker."""
    fifo = tmp_path / "pace"
    os.mkfifo(fifo)
    spool.mkdir(mode=0o700, exist_ok=True)
    spawned = env.spawn(
        paced_command(source, fifo),
        output_path=str(spool / "padopted.out"),
        status_path=str(spool / "padopted.status"),
    )
    dead = subprocess.Popen(["true"])
    dead.wait()
    writer = WriterIdentity(pid=dead.pid, start_time=1, host=socket.gethostname())
    record = ProcessRecord(
        process_id="padopted", pid=spawned.pid, pgid=spawned.pgid,
        pid_start_time=spawned.start_time, boot_id=boot_id(), writer=writer,
        owner_session_id=OWNER, backend="local", sandbox_id=env.sandbox_id, command="paced",
        cwd=None, output_path=spawned.output_path, status_path=spawned.status_path,
        started_at=time.time(), output_cap=CAP,
    )  # fmt: skip
    CheckpointStore(home, me=writer).write(record)
    # Written while no worker ran: nothing bounds it yet.
    for step in range(1, 4):
        release(fifo)
        wait_until(has_size(record.output_path, step * MIB), 60, "written")
    assert disk_bytes(record.output_path) >= 3 * MIB
    assert capped.adopt_all().adopted == ["padopted"]
    wait_until(lambda: disk_bytes(record.output_path) <= BOUND, 60, "adopted file swept")
    for step in range(4, STEPS + 1):
        release(fifo)
        wait_until(has_size(record.output_path, step * MIB), 60, "written")
        wait_until(lambda: disk_bytes(record.output_path) <= BOUND, 60, f"bounded at {step}")
    assert capped.wait("padopted", OWNER, timeout=60).status == "exited"
    check_finished(capped, home, "padopted", record.output_path)


def test_old_checkpoint_without_a_cap_gets_the_workers(
    capped: ProcessTable, env: LocalEnvironment, home: Path, spool: Path, source: Path
) -> None:
    """Ended while no worker ran, checkpointed before caps existed: bounded at its receipt."""
    spool.mkdir(mode=0o700, exist_ok=True)
    spawned = env.spawn(
        f"cat {source}",
        output_path=str(spool / "pold.out"),
        status_path=str(spool / "pold.status"),
    )
    wait_until(lambda: not env.is_running(spawned), 60, "the process to end")
    dead = subprocess.Popen(["true"])
    dead.wait()
    writer = WriterIdentity(pid=dead.pid, start_time=1, host=socket.gethostname())
    fields: dict[str, Any] = {
        "process_id": "pold", "pid": spawned.pid, "pgid": spawned.pgid,
        "pid_start_time": spawned.start_time, "boot_id": boot_id(), "writer": writer,
        "owner_session_id": OWNER, "backend": "local", "sandbox_id": env.sandbox_id,
        "command": "cat", "cwd": None, "output_path": spawned.output_path,
        "status_path": spawned.status_path, "started_at": time.time(),
    }  # fmt: skip
    CheckpointStore(home, me=writer).write(ProcessRecord.model_validate(fields))
    assert capped.adopt_all().finalized == ["pold"]
    check_finished(capped, home, "pold", spawned.output_path)


def test_no_cap_means_nothing_is_discarded(
    table: ProcessTable, env: LocalEnvironment, source: Path
) -> None:
    small = ProcessTable(table.home, lambda rec: env, spool_dir=table.spool, output_cap=0)
    try:
        rec = small.start(env, f"head -c {3 * MIB} {source}", owner_session_id=OWNER)
        info = small.wait(rec.process_id, OWNER, timeout=60)
        assert (info.output_cap, info.output_discarded, info.output_bytes) == (None, 0, 3 * MIB)
        assert disk_bytes(rec.output_path) >= 3 * MIB
        chunk = small.log(rec.process_id, OWNER, 0, 100)
        assert (chunk.offset, chunk.discarded_before) == (0, 0)
    finally:
        small.close()
