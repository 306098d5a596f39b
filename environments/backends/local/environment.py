"""The ``local`` backend: a session shell running on the worker's own machine."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import select
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal, cast

import psutil

from environments.backends.local import pty
from environments.base import (
    OUTPUT_ALIGN,
    HeadTrim,
    ShellIdentity,
    SpawnedProcess,
    discard_boundary,
)
from environments.config import BackendConfig, config_of
from environments.errors import BackendUnavailable, WorkdirNotFound
from environments.procinfo import boot_id, process_start_time
from environments.sanitize import sandbox_environment
from environments.shell.driver import SessionShell
from environments.shell.environment import ShellEnvironment

_READ_SIZE = 1 << 16
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_NO_HOLES = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
"""What ``fallocate`` says where punching holes is not supported (EINVAL: unknown mode)."""


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's 64-bit ``fallocate`` (None: not available, e.g. not glibc/musl on Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return cast("Callable[[int, int, int, int], int]", fn)


def punch_hole(fd: int, length: int) -> bool:
    """Deallocate ``[0, length)`` of the file open for writing as ``fd``, keeping its size
    (reads there return zeros); False when this file system or libc cannot."""
    fn = _fallocate()
    if fn is None:
        return False
    if fn(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_HOLES:
        return False
    raise OSError(err, os.strerror(err))


def _can_punch(directory: str) -> bool:
    """Whether files in ``directory`` can have holes punched (probed on a scratch file)."""
    fd, scratch = tempfile.mkstemp(prefix=".sbx-probe-", dir=directory)
    try:
        return punch_hole(fd, OUTPUT_ALIGN)
    except OSError:
        return False
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(scratch)


class LocalConfig(BackendConfig):
    """Settings of the local backend (``SBX_LOCAL_*``)."""

    type: Literal["local"] = "local"
    cwd: str | None = None
    """Starting directory of a new session; the worker's cwd when unset."""
    shell: str = "bash"
    """Shell for sessions; ``sh`` is used when this one is not installed."""
    forward_env: tuple[str, ...] = ()
    """Variable names passed to sandboxes even though they look secret."""
    kill_grace: float = 2.0
    """Seconds between TERM and KILL when a command times out."""


class PipeChannel:
    """A shell process on this machine, reached through its stdin and stdout pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,  # the shell leads its own session: signals to us spare it
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._in, view)
            view = view[n:]

    def read(self, timeout: float | None) -> bytes | None:
        ms = None if timeout is None else max(0, int(timeout * 1000))
        if not self._poll.poll(ms):
            return None
        try:
            return os.read(self._out, _READ_SIZE)
        except OSError:
            return b""

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def _kill_tree(pgid: int, signum: int, seen: dict[int, set[int]]) -> None:
    """Signal a process group and every descendant of its leader, even ones that left it.

    ``signum == 0`` probes: raises ``ProcessLookupError`` when none of them is
    still running (zombies count as gone).
    """
    pids = seen.setdefault(pgid, set())
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process(pgid).children(recursive=True))
    if signum == 0:
        members = pids | {p.pid for p in psutil.process_iter() if _pgid(p.pid) == pgid}
        if not any(_running(pid) for pid in members):
            raise ProcessLookupError(f"nothing left of process group {pgid}")
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class LocalEnvironment(ShellEnvironment):
    """Runs the session shell as a child process of the worker."""

    backend = "local"
    config_model = LocalConfig
    supports_pty = True
    processes_on_worker_host = True
    can_punch_holes = True

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
        super().__init__(session_id)
        self.config = config_of(LocalConfig, config)
        shell = shutil.which(self.config.shell) or shutil.which("sh")
        if shell is None:
            raise BackendUnavailable("no POSIX shell found on PATH")
        self._argv = (
            [shell, "--noprofile", "--norc", "-s"] if shell.endswith("bash") else [shell, "-s"]
        )
        self._cwd = self.config.cwd or os.getcwd()
        self._env = sandbox_environment(os.environ, self.config.forward_env)
        self._killed: dict[int, set[int]] = {}
        self._channel: PipeChannel | None = None
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    def _open(self) -> PipeChannel:
        self._channel = PipeChannel(self._argv, self._env, self._cwd)
        return self._channel

    def _kill_group(self, pgid: int, signum: int) -> None:
        _kill_tree(pgid, signum, self._killed)

    @property
    def sandbox_id(self) -> str:
        pid = self._channel.proc.pid if self._channel else 0
        return f"local:{os.uname().nodename}:{pid}"

    def _session_state(self) -> tuple[dict[str, str], str]:
        if not self.shell.alive and not self.shell.cwd:
            self.shell.start()
        return dict(self.shell.env), self.shell.cwd

    def spawn_context(
        self, workdir: str | None, env: dict[str, str] | None
    ) -> tuple[dict[str, str], str]:
        """``(environment, cwd)`` a background process starts with: the session's unless
        overridden. Raises :class:`WorkdirNotFound` (nothing is run) for a missing workdir."""
        session_env, session_cwd = self._session_state()
        cwd = workdir or session_cwd
        if not Path(cwd).is_dir():
            raise WorkdirNotFound(f"workdir does not exist: {cwd} (nothing was run)")
        return {**session_env, **(env or {})}, cwd

    def spawn(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        run_env, cwd = self.spawn_context(workdir, env)
        # The wrapper outlives the worker and records the status where a later worker
        # finds it. The command runs in a subshell (a fork, no exec) with empty
        # positional parameters. The status is one write of a few bytes, so a reader
        # sees it whole or an empty file (which it treats as "not yet"), never torn:
        # no rename, no extra process.
        wrapper = '(set -- "$1"; eval "shift; $1") </dev/null; printf %s "$?" > "$2"'
        with open(output_path, "ab", buffering=0) as out:
            os.chmod(output_path, 0o600)
            proc = subprocess.Popen(
                ["sh", "-c", wrapper, "sbx-process", command, status_path],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=run_env,
                start_new_session=True,
                close_fds=True,
            )
        return SpawnedProcess(
            pid=proc.pid,
            pgid=proc.pid,
            start_time=process_start_time(proc.pid),
            output_path=output_path,
            status_path=status_path,
        )

    def spawn_on_pty(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        return pty.spawn_on_pty(
            self,
            command,
            output_path=output_path,
            status_path=status_path,
            workdir=workdir,
            extra_env=env,
        )

    def write_input(self, process: SpawnedProcess, data: bytes) -> int:
        return pty.write_input(process.output_path, data)

    def boot_id(self) -> str | None:
        return boot_id()

    def end_stale_shell(self, shell: ShellIdentity) -> bool:
        if self.shell.alive and self.shell.shell_pid == shell.pid:
            return False
        start = process_start_time(shell.pid)
        if start is None or (shell.start_time is not None and start != shell.start_time):
            return False  # gone, or the pid is another process now: never signal it
        _kill_tree(shell.pid, signal.SIGKILL, {})
        return True

    def is_running(self, process: SpawnedProcess) -> bool:
        start = process_start_time(process.pid)
        if start is None or (process.start_time is not None and start != process.start_time):
            return False
        with contextlib.suppress(psutil.Error):
            return bool(psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE)
        return False

    def signal(self, process: SpawnedProcess, signum: int) -> bool:
        leader_start = process_start_time(process.pgid)
        if (
            leader_start is not None
            and process.start_time is not None
            and leader_start != process.start_time
            and _running(process.pgid)
        ):
            return False  # the pid is another process now: never signal it
        # With the leader gone, the group id can only still be held by our members.
        members = [p for p in psutil.process_iter() if _pgid(p.pid) == process.pgid]
        if not any(_running(p.pid) for p in members):
            return False
        try:
            os.killpg(process.pgid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read() if limit is None else f.read(limit)

    def trim_output_head(self, path: str, cap: int, *, probe: bool = False) -> HeadTrim:
        # O_WRONLY without O_APPEND/O_TRUNC: fallocate needs a writable fd; we never write.
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            cut = discard_boundary(size, cap)
            if cut == 0:
                supported = _can_punch(os.path.dirname(path) or ".") if probe else None
                return HeadTrim(size=size, discarded=0, supported=supported)
            done = punch_hole(fd, cut)
            return HeadTrim(size=size, discarded=cut if done else 0, supported=done)
        finally:
            os.close(fd)

    def _read_output_once(
        self, path: str, offset: int, limit: int, cap: int
    ) -> tuple[bytes, int, int]:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            start = max(offset, discard_boundary(os.fstat(fd).st_size, cap))
            parts: list[bytes] = []
            got = 0
            while got < limit:
                part = os.pread(fd, min(limit - got, 1 << 20), start + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
            return b"".join(parts), start, os.fstat(fd).st_size
        finally:
            os.close(fd)

    def write_file(self, path: str, data: bytes) -> None:
        tmp = f"{path}.sbx-tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def close(self) -> None:
        self.shell.close()

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        if shutil.which("bash") or shutil.which("sh"):
            return True, "ok"
        return False, "no POSIX shell on PATH"
