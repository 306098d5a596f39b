"""The fake Modal's sandboxes: real process trees on this machine, one bubblewrap jail each.

A :class:`Jail` is what a Modal Sandbox's container is here: an init process
started by ``bwrap`` with its own pid, ipc and uts namespaces (and network
namespace when the sandbox's network is blocked: only ``lo`` exists there),
the host's system directories read-only, and private writable ``/tmp``,
``/root`` and workdir backed by a per-sandbox directory. :class:`Exec` is one
``Sandbox.exec``: the command runs inside the jail through ``nsenter`` with
real pipes; its stdout and stderr are kept whole (offsets are what the task
command router serves) and its exit is a code or a signal.

Everything here runs on the fake's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SYSTEM_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt")
_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
}
# The init says "ready" once it runs (the jail's mounts are all in place), then idles.
_KEEPALIVE = "echo ready; exec >/dev/null; trap 'exit 0' TERM; while :; do sleep 3600; done"
# Runs inside the jail: enter the workdir, then become the command.
_ENTER = (
    'cd -- "$1" 2>/dev/null || { echo "workdir $1 not found" >&2; exit 126; }; shift; exec "$@"'
)
_CHUNK = 1 << 16


class Output:
    """Bytes a process wrote to one stream, kept whole, and whether the stream ended."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False
        self.changed = asyncio.Condition()

    async def pump(self, reader: asyncio.StreamReader | None) -> None:
        """Move everything ``reader`` yields into ``data`` until EOF."""
        if reader is not None:
            while chunk := await reader.read(_CHUNK):
                async with self.changed:
                    self.data += chunk
                    self.changed.notify_all()
        async with self.changed:
            self.eof = True
            self.changed.notify_all()

    async def chunks_from(self, offset: int) -> list[bytes] | None:
        """The next bytes from ``offset`` (waiting for some), or None at the end."""
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.data) > offset or self.eof)
            if len(self.data) <= offset:
                return None
            view = bytes(self.data[offset:])
        return [view[i : i + _CHUNK] for i in range(0, len(view), _CHUNK)]


@dataclass(eq=False)
class Exec:
    """One command started in a jail."""

    exec_id: str
    process: asyncio.subprocess.Process
    stdout: Output = field(default_factory=Output)
    stderr: Output = field(default_factory=Output)
    stdin_written: int = 0
    stdin_closed: bool = False
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    returncode: int | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    stdin_stream: asyncio.Task[Any] | None = None
    """The handler of the open ``TaskExecStdinWriteStream`` (a newer stream or a status
    request evicts it)."""
    stdout_readers: set[asyncio.Task[Any]] = field(default_factory=set)

    def start_pumps(self) -> None:
        self.tasks = [
            asyncio.ensure_future(self.stdout.pump(self.process.stdout)),
            asyncio.ensure_future(self.stderr.pump(self.process.stderr)),
            asyncio.ensure_future(self._wait()),
        ]

    async def _wait(self) -> None:
        self.returncode = await self.process.wait()
        self.exited.set()

    async def write_stdin(self, offset: int, data: bytes, eof: bool) -> None:
        """Write what of ``data`` (starting at ``offset`` of the stream) was not written yet.

        A replayed chunk (the client retried after a lost answer) is skipped, so
        every byte reaches the process once. Raises ``BrokenPipeError`` when the
        process no longer takes input.
        """
        if self.stdin_closed or self.process.stdin is None:
            if data and offset + len(data) > self.stdin_written:
                raise BrokenPipeError("stdin is closed")
            return
        fresh = data[max(0, self.stdin_written - offset) :] if offset <= self.stdin_written else b""
        if offset > self.stdin_written:
            raise BrokenPipeError(f"stdin offset {offset} is past {self.stdin_written}")
        try:
            if fresh:
                # Counted once handed to the pipe: a stream evicted during the drain
                # must not have its bytes re-sent.
                self.process.stdin.write(fresh)
                self.stdin_written += len(fresh)
                await self.process.stdin.drain()
            if eof:
                self.stdin_closed = True
                self.process.stdin.close()
        except (ConnectionError, RuntimeError) as exc:
            self.stdin_closed = True
            raise BrokenPipeError(str(exc)) from exc

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


class Jail:
    """One fake sandbox's container: a jailed init and the commands exec'd into it."""

    def __init__(self, directory: Path, *, hostname: str, workdir: str, block_network: bool,
                 env: dict[str, str]) -> None:  # fmt: skip
        self.directory = directory
        self.hostname = hostname
        self.workdir = workdir or "/"
        self.block_network = block_network
        self.env = {**_BASE_ENV, **env}
        self.init_pid = 0
        self._bwrap: asyncio.subprocess.Process | None = None
        self.execs: dict[str, Exec] = {}

    def _argv(self, info_fd: int) -> list[str]:
        argv = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--hostname", self.hostname, "--die-with-parent"]  # fmt: skip
        if self.block_network:
            argv.append("--unshare-net")
        for name in _SYSTEM_DIRS:
            host = Path("/") / name
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), str(host)]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(self.directory / "tmp"), "/tmp"]
        argv += ["--bind", str(self.directory / "root"), "/root"]
        if self.workdir not in ("/", "/tmp", "/root"):
            argv += ["--bind", str(self.directory / "work"), self.workdir]
        return [*argv, "--info-fd", str(info_fd), "--", "/bin/sh", "-c", _KEEPALIVE]

    async def start(self) -> None:
        """Start the jail's init. Raises ``RuntimeError`` when bwrap fails."""
        for sub in ("tmp", "root", "work"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory / "tmp", 0o1777)
        read_fd, write_fd = os.pipe()
        try:
            self._bwrap = await asyncio.create_subprocess_exec(
                *self._argv(write_fd),
                pass_fds=(write_fd,),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        assert self._bwrap.stdout is not None
        # nsenter must not join before the jail's root is in place.
        ready = await self._bwrap.stdout.readline()
        loop = asyncio.get_running_loop()
        info = await loop.run_in_executor(None, _read_all, read_fd)
        try:
            self.init_pid = int(json.loads(info)["child-pid"])
            if ready != b"ready\n":
                raise ValueError("the jail's init did not start")
        except (ValueError, KeyError):
            stderr = await self._bwrap.stderr.read() if self._bwrap.stderr else b""
            raise RuntimeError(f"bwrap did not start: {stderr.decode(errors='replace')}") from None

    @property
    def alive(self) -> bool:
        return self._bwrap is not None and self._bwrap.returncode is None

    async def exec(self, exec_id: str, argv: list[str], *, workdir: str, env: dict[str, str],
                   stdout: bool, stderr: bool, timeout: float) -> Exec:  # fmt: skip
        """Start ``argv`` in the jail (cwd ``workdir``, else the sandbox's workdir)."""
        pairs = [f"{k}={v}" for k, v in {**self.env, **env}.items()]
        command = [
            "nsenter", "-t", str(self.init_pid), "--mount", "--pid", "--ipc", "--uts", "--net",
            "--root", "--wd", "--", "env", "-i", *pairs,
            "/bin/sh", "-c", _ENTER, "sbx-fake-exec", workdir or self.workdir, *argv,
        ]  # fmt: skip
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=pipe,
            stdout=pipe if stdout else devnull,
            stderr=pipe if stderr else devnull,
            start_new_session=True,
        )
        run = Exec(exec_id, process)
        run.start_pumps()
        if timeout > 0:
            asyncio.get_running_loop().call_later(timeout, run.kill)
        self.execs[exec_id] = run
        return run

    async def stop(self) -> None:
        """Kill the jail: its init, and with it every process of its pid namespace."""
        for pid in (self.init_pid, self._bwrap.pid if self._bwrap else 0):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self._bwrap is not None:
            await self._bwrap.wait()
        for run in self.execs.values():
            run.kill()  # nsenter itself sits outside the namespace
        for run in self.execs.values():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run.exited.wait(), 10)

    def remove_files(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _read_all(fd: int) -> str:
    with os.fdopen(fd) as stream:
        return stream.read()
