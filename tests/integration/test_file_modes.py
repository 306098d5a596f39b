"""Under a permissive umask (000), everything a real worker and the ``sbx`` CLI create
for a fresh ``SBX_HOME`` is owner-only: files 0600 or tighter, directories 0700 -- the
home itself and its missing parents included, the embedded broker's files, the runtime
directory's tree (docs/security.md, "Files")."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from process_registry.runtime_dir import runtime_dir
from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import WorkerProcess, short_tmpdir, wait_until
from tests.integration.test_cli import sbx
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """umask 000 for this process and what it starts (the CLI, the worker, redis)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _open_to_others(root: Path, skip: set[Path]) -> list[str]:
    """Paths under ``root`` (itself included) with any group or other permission bit;
    the contents of ``skip`` (the jails' own /tmp and $HOME: the sandbox's files) are
    not looked into."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip or _note(found, folder, d)]
        for name in [".", *dirs, *files]:
            path = Path(folder, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{stat.filemode(mode)} {path}")
    return found


def _note(found: list[str], folder: str, name: str) -> bool:
    mode = os.lstat(Path(folder, name)).st_mode
    if mode & 0o077:
        found.append(f"{stat.filemode(mode)} {Path(folder, name)}")
    return False


def test_fresh_home_under_umask_000_is_owner_only(permissive_umask: None) -> None:
    base = short_tmpdir("sbx-modes-")  # 0700, the test's own: only what sbx makes in it counts
    home = base / "state" / "sbx"
    worker = WorkerProcess(worker_env(home, None), base / "worker.log")
    try:
        token = sbx(home, None, "session", "token", "modes")
        assert token.returncode == 0, token.stderr
        worker.start()
        with SandboxClient(session_id="modes-ready", settings=settings_for(home, None)) as c:
            wait_until(lambda: c.ping(timeout=1.0), 60, "worker to answer")
        run = sbx(home, None, "exec", "--", "echo out")
        assert (run.returncode, run.stdout) == (0, "out\n"), run.stderr
        started = sbx(home, None, "start", "--", "echo background")
        assert started.returncode == 0, started.stderr
        waited = sbx(home, None, "wait", started.stdout.strip())
        assert waited.returncode == 0, waited.stderr
        assert sbx(home, None, "keys", "rotate").returncode == 0

        runtime = runtime_dir(home)
        jails = runtime / "sandboxes" / "local"
        skip = {j / sub for j in jails.iterdir() for sub in ("tmp", "home")}
        assert _open_to_others(base / "state", skip) + _open_to_others(runtime, skip) == []
    finally:
        worker.stop()
        EmbeddedBroker(home).stop()
        if home.is_dir():
            shutil.rmtree(runtime_dir(home), ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
