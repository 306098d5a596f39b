"""``sbx cp`` against a real worker: both directions, stdin/stdout, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import worker_env
from tests.helpers import REPO


@pytest.fixture
def workdir(scratch_dir: Path) -> Path:
    """The local sandbox's starting directory (relative paths land here)."""
    return scratch_dir


@pytest.fixture
def worker(sbx_home: Path, workdir: Path, start_worker: Any) -> None:
    (workdir / "sandbox").mkdir()
    start_worker(None, SBX_LOCAL_CWD=str(workdir / "sandbox"))


def sbx(
    home: Path, *args: str, stdin: bytes = b"", **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args], input=stdin,
        env=worker_env(home, None, **env), cwd=str(REPO), capture_output=True, timeout=120,
    )  # fmt: skip


def test_cp_both_ways(sbx_home: Path, workdir: Path, worker: None) -> None:
    local = workdir / "local.bin"
    local.write_bytes(b"\x00cp test\xff" * 1000)
    p = sbx(sbx_home, "cp", str(local), ":copy.bin")
    assert p.returncode == 0, p.stderr
    assert (workdir / "sandbox" / "copy.bin").read_bytes() == local.read_bytes()
    p = sbx(sbx_home, "cp", "--json", ":copy.bin", str(workdir / "back.bin"))
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert (report["dest"], report["size"]) == (str(workdir / "back.bin"), 9000)
    assert (workdir / "back.bin").read_bytes() == local.read_bytes()
    # A remote directory takes the local name; a local directory the remote one.
    assert sbx(sbx_home, "cp", str(local), f":{workdir / 'sandbox'}/").returncode == 0
    assert (workdir / "sandbox" / "local.bin").exists()
    (workdir / "into").mkdir()
    assert sbx(sbx_home, "cp", ":copy.bin", str(workdir / "into")).returncode == 0
    assert (workdir / "into" / "copy.bin").read_bytes() == local.read_bytes()
    # stdin and stdout.
    assert sbx(sbx_home, "cp", "-", ":piped.txt", stdin=b"from stdin\n").returncode == 0
    p = sbx(sbx_home, "cp", ":piped.txt", "-")
    assert (p.returncode, p.stdout) == (0, b"from stdin\n")


def test_cp_exit_codes(sbx_home: Path, workdir: Path, worker: None) -> None:
    assert sbx(sbx_home, "cp", "a", "b").returncode == 2
    assert sbx(sbx_home, "cp", ":a", ":b").returncode == 2
    assert sbx(sbx_home, "cp", str(workdir / "missing"), ":x").returncode == 4
    p = sbx(sbx_home, "cp", ":missing", str(workdir / "x"))
    assert p.returncode == 4 and p.stderr.count(b"\n") == 1
    assert not (workdir / "x").exists()
    p = sbx(sbx_home, "cp", ":" + str(sbx_home / "secret.key"), "-")
    assert (p.returncode, p.stdout) == (3, b"")
    p = sbx(sbx_home, "cp", "-", ":x", stdin=b"x", SBX_SESSION_ID="someone",
            SBX_SESSION_TOKEN="sbx1.wrong-token-value")  # fmt: skip
    assert p.returncode == 3
