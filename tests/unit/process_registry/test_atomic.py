"""atomic.py: modes, symlink refusal, id validation, crash injection (old or new, never torn)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from environments.backends.local.sessiondirs import private_dir
from process_registry.atomic import (
    atomic_write,
    ensure_private_dir,
    read_nofollow,
    sweep_temp_files,
    validate_id,
)
from process_registry.models import AlreadyExists, InvalidId, UnsafePath
from process_registry.private_dirs import make_private_dirs

REPO = Path(__file__).resolve().parents[3]


def test_modes_are_private(tmp_path: Path) -> None:
    d = ensure_private_dir(tmp_path / "a" / "b")
    path = atomic_write(d, "x.json", b"{}")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_nofollow(path) == b"{}"


@pytest.mark.parametrize("make", [make_private_dirs, ensure_private_dir, private_dir])
def test_missing_parents_are_private_whatever_the_umask(
    tmp_path: Path, make: Callable[[Path], object]
) -> None:
    old = os.umask(0)
    try:
        make(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path


def test_make_private_dirs_keeps_existing_and_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    make_private_dirs(tmp_path / "open" / "new")
    assert stat.S_IMODE(os.stat(tmp_path / "open").st_mode) == 0o755  # not ours to change
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        make_private_dirs(tmp_path / "file")
    with pytest.raises(NotADirectoryError):
        make_private_dirs(tmp_path / "file" / "below")


def test_symlinked_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePath):
        ensure_private_dir(tmp_path / "link")


def test_symlinked_file_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    d = ensure_private_dir(tmp_path / "d")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (d / "r.json").symlink_to(victim)
    with pytest.raises(UnsafePath):
        read_nofollow(d / "r.json")
    with pytest.raises(AlreadyExists):
        atomic_write(d, "r.json", b"evil", exclusive=True)
    atomic_write(d, "r.json", b"new")  # replaces the link itself
    assert victim.read_text() == "precious"
    assert not (d / "r.json").is_symlink()


def test_a_file_over_the_limit_is_not_read(tmp_path: Path) -> None:
    d = ensure_private_dir(tmp_path / "d")
    with open(d / "big.json", "wb") as f:
        os.truncate(f.fileno(), 1 << 34)  # sparse: would not fit in memory
    with pytest.raises(UnsafePath):
        read_nofollow(d / "big.json", limit=1 << 20)
    atomic_write(d, "small.json", b"{}")
    assert read_nofollow(d / "small.json", limit=2) == b"{}"


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "a.b", "x" * 65, "..", "a\x00"])
def test_ids_cannot_traverse(bad: str) -> None:
    with pytest.raises(InvalidId):
        validate_id(bad)


def test_exclusive_write_has_one_winner(tmp_path: Path) -> None:
    d = ensure_private_dir(tmp_path / "d")
    atomic_write(d, "p.json", b"first", exclusive=True)
    with pytest.raises(AlreadyExists):
        atomic_write(d, "p.json", b"second", exclusive=True)
    assert read_nofollow(d / "p.json") == b"first"
    assert [n for n in os.listdir(d)] == ["p.json"]  # the loser left no temp file


_WRITER = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from process_registry.atomic import atomic_write
    d = Path(sys.argv[1])
    i = 0
    while True:
        i += 1
        pad = str(i) * (200_000 // len(str(i)))
        body = json.dumps({{"n": i, "pad": pad, "sha": hashlib.sha256(pad.encode()).hexdigest()}})
        atomic_write(d, "state.json", body.encode())
        print(i, flush=True)
    """
)


def test_crash_injection_leaves_old_or_new(tmp_path: Path) -> None:
    """SIGKILL a writer at random points many times: the file always parses and is whole."""
    d = ensure_private_dir(tmp_path / "d")
    script = _WRITER.format(repo=str(REPO))
    rng = random.Random(1234)
    last_seen = 0
    for _ in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(d)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        # Let it complete a random number of writes; it is then somewhere inside the next one.
        for _ in range(rng.randint(1, 4)):
            line = proc.stdout.readline()
            assert line, "writer died on its own"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        body = json.loads((d / "state.json").read_text())
        assert hashlib.sha256(body["pad"].encode()).hexdigest() == body["sha"]
        assert body["n"] >= 1
        last_seen = body["n"]
    assert last_seen >= 1
    sweep_temp_files(d)
    assert os.listdir(d) == ["state.json"]


_STORE_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from process_registry.checkpoints import CheckpointStore
    from process_registry.models import ProcessRecord, Receipt, WriterIdentity
    from process_registry.receipts import ReceiptStore
    home, start = Path(sys.argv[1]), int(sys.argv[2])
    receipts, checkpoints = ReceiptStore(home), CheckpointStore(home)
    for i in range(start, start + 10_000):
        now = time.time()
        out = "line %d\\n" % i * 2000
        receipts.write(Receipt(
            process_id=f"p{{i}}", owner_session_id="s1", command="x", backend="local",
            sandbox_id="l", cwd=None, started_at=now, ended_at=now, exit_code=0,
            status="exited", output=out, output_truncated=False, output_bytes=len(out)))
        checkpoints.write(ProcessRecord(
            process_id=f"c{{start}}", pid=1, pgid=1, pid_start_time=i, boot_id=None,
            writer=WriterIdentity.current(), owner_session_id="s1", backend="local",
            sandbox_id="l", command="y" * 100_000, cwd=None, output_path="o", status_path="s",
            started_at=now))
        print(i, flush=True)
    """
)


def test_crash_injection_in_receipt_and_checkpoint_writes(tmp_path: Path) -> None:
    """Receipt/checkpoint writers SIGKILLed at random points: no torn file, chain intact."""
    from process_registry.checkpoints import CheckpointStore
    from process_registry.receipts import ReceiptStore

    home = tmp_path / "home"
    rng = random.Random(99)
    start = 0
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", _STORE_WRITER.format(repo=str(REPO)), str(home), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 3)):
            assert proc.stdout.readline(), "writer died on its own"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        start += 10_000
        receipts = ReceiptStore(home)  # sweeps the dead writer's temp files
        for r in receipts.list("s1"):
            assert r.is_intact()
        assert receipts.verify(["s1"]) == []
        # The dead writer's checkpoint is whole (old or new), and its writer is gone.
        record = CheckpointStore(home).load(f"c{start - 10_000}")
        assert record is not None and record.writer.is_gone()
