"""The Environment contract every sandbox backend implements.

An :class:`Environment` is one sandbox serving one session: a process on this
machine, a container, a remote host over SSH, a cloud sandbox. The contract
is written here, in the docstrings; ``environments.conformance`` checks it
against every backend.
"""

from __future__ import annotations

import abc
import threading
from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class ExecResult(BaseModel):
    """Outcome of one foreground command."""

    model_config = ConfigDict(frozen=True)

    output: str
    """stdout and stderr interleaved as written, decoded as UTF-8 (invalid bytes become U+FFFD);
    at most ``output_limit`` bytes: head and tail, with a marker saying how much was cut."""
    exit_code: int
    """The command's status; 124 on timeout; 128+N when a signal N ended it."""
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    """Bytes the command wrote in all, kept or not."""
    cwd: str
    """The session's working directory after the call: where the next call starts."""
    duration_ms: int = 0
    shell_restarted: bool = False
    """True when the session shell had died and was replaced (state replayed) for this call."""
    cancelled: bool = False
    """True when the caller cancelled the call; its tree was killed and exit_code is 130."""


class SpawnedProcess(BaseModel):
    """Handle of a background process, enough to find it again after a worker restart."""

    model_config = ConfigDict(frozen=True)

    pid: int
    pgid: int
    start_time: int | None = None
    """Kernel start time of ``pid`` (clock ticks since boot), when the backend can read it."""
    output_path: str
    status_path: str


class Environment(abc.ABC):
    """One sandbox serving one session.

    Contract:

    * ``exec`` runs a shell command in the session's shell. ``cd`` and ``export``
      done by one call are seen by the next call of the same session and by no
      other session. The command's stdin is empty (it reads EOF at once). A
      ``workdir`` applies to that call only; if it does not exist nothing runs
      and :class:`~environments.errors.WorkdirNotFound` is raised.
    * A command that outlives ``timeout`` seconds has its whole process tree
      killed (TERM, then KILL after the backend's grace period) and yields exit
      code 124; the sandbox and the session stay usable.
    * ``exit N`` reports status N and leaves the session where it was.
    * A job backgrounded with ``&`` that keeps stdout open does not hold the call.
    * Output is bounded by ``output_limit`` bytes while it is read.
    * ``spawn`` starts a detached background process (own session and process
      group) whose output goes to ``output_path`` and whose exit status is
      written to ``status_path`` when it ends, so both survive the worker.
    * ``read_file``/``write_file`` move bytes in and out of the sandbox.
    * ``close`` releases everything the sandbox holds; calling it twice is fine.

    Implementations are used by one thread at a time per instance (the pool
    serialises calls of a session).
    """

    backend: ClassVar[str]
    """Registered backend name, e.g. ``"local"``."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    @property
    @abc.abstractmethod
    def sandbox_id(self) -> str:
        """Stable identifier of the sandbox (container id, host:pid, ...)."""

    @abc.abstractmethod
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
        """Run ``command`` in the session shell and return its result (see class docstring).

        When ``cancel`` is set while the command runs, its tree is killed as on a
        timeout and the result has ``cancelled=True`` and exit code 130.
        """

    @abc.abstractmethod
    def spawn(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        """Start ``command`` detached, in the session's cwd and environment unless overridden."""

    @abc.abstractmethod
    def is_running(self, process: SpawnedProcess) -> bool:
        """True while ``process`` runs; False once it ended or its pid was reused."""

    @abc.abstractmethod
    def signal(self, process: SpawnedProcess, signum: int) -> bool:
        """Deliver ``signum`` to the process group of ``process``; True if any member got it.

        Members that outlived the group leader (a command ignoring TERM under a
        shell that did not) are still signalled. Never signals a reused pid: if
        the pid now belongs to another process, nothing is sent. ``signum`` 0
        probes whether anything of the group is left.
        """

    @abc.abstractmethod
    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        """Bytes of ``path`` in the sandbox from ``offset`` (at most ``limit``)."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` in the sandbox with ``data``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the sandbox. Idempotent."""

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """Whether this backend can run here, and why not."""
        return True, "ok"

    @classmethod
    def reap_orphans(cls, max_idle: float) -> list[str]:
        """Remove sandboxes of this backend left behind by dead workers, idle for
        more than ``max_idle`` seconds; return their names. Default: nothing to do."""
        return []
