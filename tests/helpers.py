"""Shared helpers for tests: real services started and stopped by the test session."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IN_CI = bool(os.environ.get("CI"))


def require(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI: a missing service is a failure there."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required service missing in CI: {reason}")
    pytest.skip(reason)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true (a readiness condition); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def short_tmpdir(prefix: str) -> Path:
    """A short path (unix socket paths are limited to about 100 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class RedisProcess:
    """A real redis-server on 127.0.0.1 at a fixed port, which tests may kill and restart."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        require(exe is not None, "redis-server is not installed (apt-get install redis-server)")
        assert exe is not None
        self.exe = exe
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = short_tmpdir("sbx-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (empty: nothing is persisted) and wait until it answers."""
        import redis

        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        try:
            wait_until(answers, 20, "redis-server to answer")
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A real redis-server on 127.0.0.1 and a free port; yields its URL."""
    server = RedisProcess()
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


class WorkerProcess:
    """An ``sbx worker`` running in its own process."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "INFO"],
                env=self.env,
                cwd=str(REPO),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def files_containing(root: Path, needles: tuple[str, ...] | list[str]) -> list[str]:
    """``path:needle-prefix`` for every regular file under ``root`` holding any needle.

    Files may come and go while a worker runs (checkpoints, temp files); a file
    that vanished between listing and reading holds nothing any more.
    """
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_socket() or not path.is_file():
                continue
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            continue
        found += [f"{path}:{n[:6]}" for n in needles if n.encode() in data]
    return found
