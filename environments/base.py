"""The Environment contract every sandbox backend implements.

An :class:`Environment` is one sandbox serving one session: a process on this
machine, a container, a remote host over SSH, a cloud sandbox. The contract
is written here, in the docstrings; ``environments.conformance`` checks it
against every backend.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from environments.config import BackendConfig
from environments.errors import Unsupported


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


OUTPUT_ALIGN = 64 * 1024
"""Granularity of head discards in output files: a multiple of the block size of
common file systems (4 KiB ext4/xfs/tmpfs pages, up to 64 KiB blocks), so a punched
head frees whole blocks."""


def discard_boundary(size: int, cap: int) -> int:
    """First byte a ``cap``-limited output file of ``size`` bytes keeps on disk.

    0 when ``cap`` is 0 (unlimited) or the file is within it; else ``size - cap``
    rounded up to :data:`OUTPUT_ALIGN` (never past ``size``), so at most ``cap``
    bytes stay on disk. Bytes before it may read as zeros (a hole). Sweepers and
    readers use this one formula: the size only grows, so a reader that measures it
    *after* reading knows every byte a concurrent sweep may have punched.
    """
    if cap <= 0 or size <= cap:
        return 0
    return min(size, -(-(size - cap) // OUTPUT_ALIGN) * OUTPUT_ALIGN)


class HeadTrim(BaseModel):
    """What :meth:`Environment.trim_output_head` did to one output file."""

    model_config = ConfigDict(frozen=True)

    size: int
    """The file's size (every byte ever written: holes keep their offsets)."""
    discarded: int
    """Bytes at the head that are holes now (0 when nothing had to go, or could not)."""
    supported: bool | None
    """False: this sandbox cannot punch holes (the file grows past the cap); True: it
    can; None: not checked (nothing had to go and no probe was asked)."""


class OutputWindow(BaseModel):
    """Bytes of a cap-limited output file, never from its discarded head."""

    model_config = ConfigDict(frozen=True)

    data: bytes
    start: int
    """Offset of ``data[0]``: the requested offset, or ``discarded`` when that was higher."""
    size: int
    """The file's size, measured after the read."""
    discarded: int
    """``discard_boundary(size, cap)``: bytes before it are not available."""


class ShellState(BaseModel):
    """A session's state between calls: where its next command starts and what it exports."""

    model_config = ConfigDict(frozen=True)

    cwd: str
    env: dict[str, str]


class ShellIdentity(BaseModel):
    """The session shell as a process in the sandbox (to end what it left running)."""

    model_config = ConfigDict(frozen=True)

    pid: int
    start_time: int | None = None


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
    * ``trim_output_head`` bounds a background process's output file on disk by
      punching a hole over its oldest bytes (offsets stay valid); ``read_output``
      reads such a file without ever returning bytes of the hole.
    * ``close`` releases everything the sandbox holds; calling it twice is fine.

    Implementations are used by one thread at a time per instance (the pool
    serialises calls of a session).
    """

    backend: ClassVar[str]
    """Registered backend name, e.g. ``"local"``."""
    config_model: ClassVar[type[BackendConfig]]
    """The pydantic model of this backend's settings; ``config_model()`` holds the defaults."""
    supports_pty: ClassVar[bool] = False
    """:meth:`spawn_on_pty` and :meth:`write_input` work (else they raise ``Unsupported``)."""
    processes_on_worker_host: ClassVar[bool] = False
    """Background processes run on the worker's own machine: their pids are the worker
    kernel's, their output files are host files, and any sandbox of the session can reach
    them. False: they live inside the sandbox and only that sandbox reaches them."""
    can_punch_holes: ClassVar[bool] = False
    """:meth:`trim_output_head` can discard the head of an output file (where the file
    system allows); False: output files grow past their cap."""

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
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

    def spawn_on_pty(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        """As :meth:`spawn`, on a pseudo-terminal whose input :meth:`write_input` feeds.

        Raises ``Unsupported`` on backends without :attr:`supports_pty`.
        """
        raise Unsupported(
            f"pty background processes are not supported on the {self.backend!r} backend; "
            "start it without pty"
        )

    def write_input(self, process: SpawnedProcess, data: bytes) -> int:
        """Type ``data`` into a process started by :meth:`spawn_on_pty`; bytes written.

        Raises ``Unsupported`` on backends without :attr:`supports_pty`, ``OSError``
        when the process no longer takes input.
        """
        raise Unsupported(f"the {self.backend!r} backend has no pty input")

    def process_paths(self, process_id: str, spool: str) -> tuple[str, str]:
        """``(output_path, status_path)`` for background process ``process_id``.

        ``spool`` is the worker's directory for output files of processes that run
        on its host (:attr:`processes_on_worker_host`); other backends keep the
        files inside the sandbox.
        """
        if self.processes_on_worker_host:
            base = f"{spool}/{process_id}"
        else:
            base = f"/tmp/sbx-{process_id}"
        return base + ".out", base + ".status"

    def boot_id(self) -> str | None:
        """Boot id of the kernel the sandbox's processes run on (None: cannot tell).

        Part of a process's identity: a pid and start time match only on the same boot.
        """
        return None

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

    def trim_output_head(self, path: str, cap: int, *, probe: bool = False) -> HeadTrim:
        """Punch a hole over the head of the output file ``path`` so that at most
        ``cap`` bytes of it (the newest) stay on disk; its size and offsets stay.

        Discards ``[0, discard_boundary(size, cap))``; an appending writer is
        undisturbed. ``probe`` checks whether holes can be punched there even
        when nothing has to go yet. Raises ``FileNotFoundError`` for a missing
        file. Default: this backend cannot (``supported=False``).
        """
        return HeadTrim(size=len(self.read_file(path)), discarded=0, supported=False)

    def read_output(self, path: str, offset: int, limit: int, cap: int = 0) -> OutputWindow:
        """At most ``limit`` bytes of output file ``path`` from ``offset``, skipping the
        head a ``cap`` discards (see :func:`discard_boundary`): never bytes of a hole,
        also while a sweep punches concurrently. ``limit`` 0 only measures the size.
        """
        want = offset
        for _ in range(4):
            data, start, size = self._read_output_once(path, want, limit, cap)
            cut = discard_boundary(size, cap)
            if cut <= start:
                return OutputWindow(data=data, start=start, size=size, discarded=cut)
            if cut < start + len(data) or limit == 0:
                # A sweep may have punched [start, cut) while we read: drop that part.
                return OutputWindow(data=data[cut - start :], start=cut, size=size, discarded=cut)
            want = cut  # all we read may be a hole now: read again from the kept part
        return OutputWindow(data=b"", start=max(offset, cut), size=size, discarded=cut)

    def _read_output_once(
        self, path: str, offset: int, limit: int, cap: int
    ) -> tuple[bytes, int, int]:
        """``(data, start, size after the read)`` for :meth:`read_output`; backends
        override this whole-file default with a cheaper read."""
        whole = self.read_file(path)
        start = max(offset, discard_boundary(len(whole), cap))
        return whole[start : start + limit], start, len(whole)

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` in the sandbox with ``data``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the sandbox. Idempotent."""

    def rest(self) -> None:
        """The session is idle: end what costs memory while nothing runs (the session
        shell), keeping the session's state -- its next call starts a new shell with the
        same cwd and variables. Background processes are untouched. Default: nothing."""
        return None

    def detach(self) -> None:
        """Let go of the sandbox without ending it: another worker serves the session now.
        Ends what this object holds (its shell, connections); the sandbox, its files and
        processes stay. Default: :meth:`close` (for backends whose sandbox is this worker's
        alone)."""
        self.close()

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        """Whether this backend can run here with ``config`` (defaults when None), and why not."""
        return True, "ok"

    def attach(self) -> str:
        """Find (or create) the session's sandbox now and return its :attr:`sandbox_id`.

        Raises :class:`~environments.errors.SandboxError` when it cannot be reached.
        """
        return self.sandbox_id

    def session_state(self) -> ShellState | None:
        """The session's cwd and exported variables after its last call (None: this
        backend keeps none, or no call ran yet)."""
        return None

    def restore_session_state(self, state: ShellState) -> None:
        """Continue a session another worker served: its next command starts in
        ``state.cwd`` (when that exists) with ``state.env`` exported. Default: nothing."""
        return None

    def shell_identity(self) -> ShellIdentity | None:
        """The live session shell's pid and start time in the sandbox (None: none)."""
        return None

    def end_stale_shell(self, shell: ShellIdentity) -> bool:
        """End ``shell`` (another worker's session shell in this sandbox) and everything
        it still runs, if that pid is still that process; True if anything was signalled.
        Default: cannot (False)."""
        return False

    def touch(self) -> None:
        """Called periodically while the session is in use or runs background processes;
        backends whose service stops idle sandboxes refresh their activity. Default: nothing."""
        return None

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        """Remove sandboxes of this backend left behind by dead workers, idle for more
        than ``max_idle`` seconds, unless ``keep(session_id)`` claims their session (it is
        in use by a live worker or runs background processes); return their names.
        Default: nothing to do."""
        return []
