"""Shared helpers for tests: real services started and stopped by the test session."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
IN_CI = bool(os.environ.get("CI"))


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (reaped, or a zombie waiting for its parent).

    Asked in one step: a process that exits between two questions ("does it exist?",
    "what is its status?") counts as gone, never as an error."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def require(condition: bool, reason: str) -> None:
    """Skip locally, fail in CI: a missing service is a failure there."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required service missing in CI: {reason}")
    pytest.skip(reason)


def require_module(name: str, install: str) -> None:
    """At a test module's top: skip it locally when ``name`` cannot be imported.

    In CI the module is part of the suite: a missing one fails, never skips.
    """
    import importlib.util

    if importlib.util.find_spec(name) is not None:
        return
    if IN_CI:
        raise ImportError(f"{name} is missing in CI: {install}")
    pytest.skip(f"{name} is not installed ({install})", allow_module_level=True)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true (a readiness condition); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def held_command(tmp_path: Path, word: str, before: str = "") -> tuple[Path, Path, str]:
    """``(started, go, command)``: the command runs ``before``, touches ``started``, then
    waits for the test to create ``go`` and prints ``word``."""
    started, go = tmp_path / "started", tmp_path / "go"
    wait = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; echo {word}"
    return started, go, before + wait


class ToolCaller(Protocol):
    def tool_call(self, name: str, args: Any, *, wait: float | None = None) -> str: ...


def call(client: ToolCaller, tool: str, args: Any) -> dict[str, Any]:
    """``client``'s call of ``tool`` with ``args``: its JSON answer."""
    answer: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return answer


def call_in_background(
    client: ToolCaller, command: str, wait: float
) -> tuple[threading.Thread, list[object]]:
    """A started thread making ``client``'s terminal call of ``command``, and the list that
    gets its answer or the exception it raised."""
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(client.tool_call("terminal", {"command": command}, wait=wait))
        except BaseException as exc:  # the test asserts what came back
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    return thread, outcome


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
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        # No retries: a refused connection is an answer (not yet), asked again at once.
        client = redis.Redis(port=self.port, retry=Retry(NoBackoff(), 0))

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        try:
            wait_until(answers, 60, "redis-server to answer")
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


def installed_distribution(where: Path, name: str, entry_points: str) -> Path:
    """A directory to put on ``PYTHONPATH`` that holds an installed distribution ``name``
    whose ``entry_points.txt`` is ``entry_points`` (plugins "from another package")."""
    dist = where / f"{name.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)
    return where


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




def unique_sleep_seconds() -> str:
    """A ``sleep`` argument no other process on this host has: a jailed command (its own
    pid namespace, so the pid it sees is not the host's) is found by it."""
    import secrets

    return f"{600 + secrets.randbelow(10**6) / 10**3:.3f}"


def end_sleeps(seconds: str) -> None:
    """Kill every ``sleep seconds`` on this host (a test's own: its argument is unique)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", seconds]:
            with contextlib.suppress(psutil.Error):
                proc.kill()


def sleeping(seconds: str) -> bool:
    """True while a (not yet reaped-away, not zombie) ``sleep seconds`` runs on this host."""
    import psutil

    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] == ["sleep", seconds] and (
            proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            return True
    return False
