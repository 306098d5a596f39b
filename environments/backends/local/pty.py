"""Background processes on a pseudo-terminal, for the local backend.

A pty's master side must be held by someone for the process to keep its
terminal; if the worker held it, the process would get SIGHUP when the worker
died. So a tiny *relay* (stdlib-only Python run with ``-I -c``) owns it:

* the relay leads its own session and process group and makes the pty its
  controlling terminal; the command runs in that same process group with the
  pty as stdin/stdout/stderr, so signalling the group (``Environment.signal``)
  reaches the command, and Ctrl-C written to the pty does too;
* everything the command writes to the terminal is appended to ``output_path``;
* bytes written to the FIFO ``input_path`` (see :func:`write_input`) are fed
  to the terminal; the relay keeps the FIFO open for reading and writing, so
  writers come and go without EOF;
* when the command ends, its status (exit code, or 128+N for signal N) is
  written to ``status_path`` atomically (temp file + rename) and the FIFO is
  removed. The relay ignores SIGTERM/SIGINT/SIGHUP itself so that it outlives
  the command just long enough to record that status.

Contract of the local backend's ``spawn_on_pty``: same as ``Environment.spawn`` (session cwd
and sandbox environment unless overridden; the returned handle's pid/pgid
is the relay's, the group leader), plus the input FIFO. In a jail the relay
runs inside, as the jail's init (:mod:`environments.backends.local.spawn`).
The relay writes one byte to its ``ready`` descriptor once the FIFO is open and
the command forked.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Callable

from environments.pty_relay import RELAY, InputUnavailable, input_path_for

__all__ = ["InputUnavailable", "input_path_for", "relay_command", "start_relay", "write_input"]


def relay_command(python: str, command: str, output_path: str, status_path: str, ready: int
                  ) -> list[str]:  # fmt: skip
    """The relay's command line: ``python`` runs it (stdlib only, isolated mode)."""
    in_path = input_path_for(output_path)
    return [python, "-I", "-c", RELAY, output_path, status_path, in_path, command, str(ready)]


def start_relay(argv_for: Callable[[int], list[str]], *, cwd: str, env: dict[str, str]) -> int:
    """Start the relay ``argv_for(ready_fd)`` detached on this host (no jail); its pid,
    returned once its FIFO is open and the command forked (or the relay died)."""
    ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
    try:
        proc = subprocess.Popen(
            argv_for(ready_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
            pass_fds=(ready_w,),
        )
        os.close(ready_w)
        ready_w = -1
        os.read(ready_r, 1)
    finally:
        os.close(ready_r)
        if ready_w >= 0:
            os.close(ready_w)
    return proc.pid


def _open_fifo(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)


def write_input(
    output_path: str, data: bytes, opener: Callable[[str, int], int] = _open_fifo
) -> int:
    """Send ``data`` to the terminal of the pty process writing ``output_path``.

    ``opener(path, flags)`` opens the FIFO (a jail's opener never follows a link).
    Returns the bytes written. Raises :class:`InputUnavailable` when no relay
    reads the FIFO (the process ended or never had a pty). A relay is ready (its
    FIFO open) before its start returns, so a write right after a start works.
    """
    path = input_path_for(output_path)
    try:
        fd = opener(path, os.O_WRONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputUnavailable("the process has no terminal input (ended, or not pty)") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InputUnavailable("the process is not reading input any more") from None
        if exc.errno == errno.ELOOP:
            raise InputUnavailable("the process's input is not a private FIFO") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.getuid():
            raise InputUnavailable("the process's input is not a private FIFO")
        view = memoryview(data)
        written = 0
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                raise InputUnavailable(
                    f"the process's input buffer is full ({written} bytes were sent)"
                ) from None
            written += n
            view = view[n:]
        return written
    finally:
        os.close(fd)
