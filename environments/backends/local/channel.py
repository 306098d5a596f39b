"""A shell process on this machine reached through a pair of pipes."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Callable
from typing import IO

from environments.errors import SandboxDead

_READ_SIZE = 1 << 16


class PipeChannel:
    """A shell process on this machine, reached through pipes to its stdin and stdout.

    Built with ``argv`` the process is started here, its stdin and stdout the pipes;
    built with :meth:`over` the caller started it and hands over the pipes' ends.
    Either way the process leads its own session and process group, which
    :meth:`close` kills. ``pass_fds`` are inherited by the process; its stderr goes to
    the descriptor ``stderr`` (default: nowhere).
    """

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        pass_fds: tuple[int, ...] = (),
        stderr: int = subprocess.DEVNULL,
    ) -> None:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            start_new_session=True,  # the shell leads its own session: signals to us spare it
            close_fds=True,
            pass_fds=pass_fds,
        )
        assert proc.stdin is not None and proc.stdout is not None
        self._attach(proc, proc.stdin, proc.stdout)

    @classmethod
    def over(
        cls,
        proc: subprocess.Popen[bytes],
        to_shell: int,
        from_shell: int,
        explain: Callable[[], str] | None = None,
    ) -> PipeChannel:
        """A channel to ``proc`` (started in its own session) through the write end
        ``to_shell`` and the read end ``from_shell``, which the channel now owns.

        ``explain()`` says why the process could not run (e.g. its sandbox could not be
        made); when it says anything at the end of the stream, :meth:`read` raises
        :class:`SandboxDead` with it instead of returning EOF.
        """
        channel = cls.__new__(cls)
        channel._attach(proc, open(to_shell, "wb", 0), open(from_shell, "rb", 0))  # noqa: SIM115
        channel._explain = explain
        return channel

    def _attach(self, proc: subprocess.Popen[bytes], to_shell: IO[bytes], from_shell: IO[bytes]
                ) -> None:  # fmt: skip
        self.proc = proc
        self._explain: Callable[[], str] | None = None
        self._streams = (to_shell, from_shell)
        self._in = to_shell.fileno()
        self._out = from_shell.fileno()
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
            data = os.read(self._out, _READ_SIZE)
        except OSError:
            data = b""
        if not data and self._explain is not None and (why := self._explain()):
            raise SandboxDead(f"the session shell could not start: {why}")
        return data

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for stream in self._streams:
            with contextlib.suppress(OSError):
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
