"""A complete in-memory :class:`~environments.base.Environment` for tests of its users.

It implements the whole contract (type-checked, so it cannot lag behind it):
``exec`` echoes the command back and can be held on a gate (to test pools and
cancellation), background processes are records that end when told to, and
files live in a dict. No process is started and nothing touches the disk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar, Literal

from environments.base import Environment, ExecResult, SpawnedProcess
from environments.config import BackendConfig, config_of
from environments.errors import Unsupported, WorkdirNotFound


class MemoryConfig(BackendConfig):
    """Settings of the in-memory backend."""

    type: Literal["memory"] = "memory"
    cwd: str = "/"


class MemoryEnvironment(Environment):
    """Records calls; ``exec`` can be made to block on ``gate`` until it is set."""

    backend: ClassVar[str] = "memory"
    config_model: ClassVar[type[BackendConfig]] = MemoryConfig

    def __init__(
        self,
        session_id: str,
        config: BackendConfig | None = None,
        *,
        gate: threading.Event | None = None,
    ) -> None:
        super().__init__(session_id, config)
        self.config = config_of(MemoryConfig, config)
        self.gate = gate
        self.entered = threading.Event()
        self.commands: list[str] = []
        self.closed = 0
        self.detached = 0
        self.rested = 0
        self.active = 0
        self.max_active = 0
        self.cwd = self.config.cwd
        self.files: dict[str, bytes] = {}
        self.directories: set[str] = {"/", self.cwd}
        self.running: dict[int, SpawnedProcess] = {}
        self.signals: list[tuple[int, int]] = []
        self._next_pid = 1000
        self._lock = threading.Lock()

    @property
    def sandbox_id(self) -> str:
        return f"memory:{self.session_id}"

    def exec(
        self,
        command: str,
        *,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 180.0,
        output_limit: int = 100_000,
        cancel: threading.Event | None = None,
    ) -> ExecResult:
        if workdir is not None and workdir not in self.directories:
            raise WorkdirNotFound(f"workdir does not exist: {workdir} (nothing was run)")
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.commands.append(command)
        self.entered.set()
        try:
            ended = self._hold(timeout, cancel)
        finally:
            with self._lock:
                self.active -= 1
        if ended == "cancel":
            return ExecResult(output="", exit_code=130, cwd=self.cwd, cancelled=True)
        if ended == "timeout":
            return ExecResult(output="", exit_code=124, cwd=self.cwd, timed_out=True)
        data = command.encode()
        kept = data[:output_limit]
        return ExecResult(
            output=kept.decode(errors="replace"),
            exit_code=0,
            cwd=self.cwd,
            truncated=len(kept) < len(data),
            output_bytes=len(data),
        )

    def _hold(self, timeout: float, cancel: threading.Event | None) -> str:
        """Wait on the gate: ``"done"``, ``"cancel"`` or ``"timeout"``."""
        if self.gate is None:
            return "cancel" if cancel is not None and cancel.is_set() else "done"
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            while not self.gate.wait(0.01):
                if cancel is not None and cancel.is_set():
                    return "cancel"
                if deadline.is_set():
                    return "timeout"
            return "done"
        finally:
            timer.cancel()

    def spawn(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        if workdir is not None and workdir not in self.directories:
            raise WorkdirNotFound(f"workdir does not exist: {workdir} (nothing was run)")
        with self._lock:
            pid = self._next_pid
            self._next_pid += 1
        process = SpawnedProcess(
            pid=pid, pgid=pid, start_time=pid, output_path=output_path, status_path=status_path
        )
        self.files[output_path] = b""
        self.running[pid] = process
        return process

    def finish(self, process: SpawnedProcess, status: int, output: bytes = b"") -> None:
        """End ``process`` with exit ``status`` after writing ``output``, as a real one would."""
        self.files[process.output_path] = self.files.get(process.output_path, b"") + output
        self.files[process.status_path] = str(status).encode()
        self.running.pop(process.pid, None)

    def is_running(self, process: SpawnedProcess) -> bool:
        known = self.running.get(process.pid)
        return known is not None and known.start_time == process.start_time

    def signal(self, process: SpawnedProcess, signum: int) -> bool:
        if not self.is_running(process):
            return False
        self.signals.append((process.pgid, signum))
        if signum != 0:
            self.finish(process, 128 + signum)
        return True

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        try:
            data = self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None
        end = None if limit is None else offset + limit
        return data[offset:end]

    def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = bytes(data)

    def write_input(self, process: SpawnedProcess, data: bytes) -> int:
        raise Unsupported("the memory backend has no pty input")

    def close(self) -> None:
        self.closed += 1

    def detach(self) -> None:
        self.detached += 1

    def rest(self) -> None:
        self.rested += 1

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        return []
