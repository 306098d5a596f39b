"""Starting a detached background process as the init of a jail of its own.

The process leads a new session and process group inside its own pid
namespace; :func:`start_jailed` returns the host's number of that leader, so
PID-safety (pid + start time + boot id) works on host pids as without a jail.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Callable

from environments.backends.local.jail import Jail
from environments.backends.local.launch import LAUNCH_ENV
from environments.errors import SandboxDead

_START_TIMEOUT_S = 30.0

_RUN = '(set -- "$1"; eval "shift; $1") </dev/null 2>&1; printf %s "$?" > "$2"'

PLAIN_WRAPPER = "exec 2>/dev/null; trap : TERM; " + _RUN
"""Runs ``$1`` with empty positional parameters and stdin, then writes its status to
``$2`` in one write: a reader sees it whole or an empty file ("not yet"), never torn.

The wrapper leads the process's group, so a kill's TERM reaches it too: it outlives
that TERM (its command does not inherit the trap) to record what the command made of
it; a command that needed the KILL ends with its wrapper, unrecorded, and is known by
that. The command's stderr goes to the output, the wrapper's own (``Terminated``)
nowhere."""


def jailed_wrapper(ready: int) -> str:
    """:data:`PLAIN_WRAPPER` for a jail, where the wrapper is the namespace's init (which
    no TERM from outside ends), and one byte to ``ready`` once running (through
    ``/proc``: dash takes one-digit descriptors)."""
    return f"exec 2>/dev/null; printf . >/proc/self/fd/{ready}; " + _RUN


def _read(fd: int, deadline: float, *, one_byte: bool) -> bytes:
    """From ``fd`` until EOF or ``deadline`` (monotonic): one byte, or until a JSON
    document (or any text) ends."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data
        chunk = os.read(fd, 1 if one_byte else 4096)
        data += chunk
        if not chunk or one_byte or data.rstrip().endswith(b"}"):
            return data


def start_jailed(
    jail: Jail,
    inner: Callable[[int, int], list[str]],
    *,
    cwd: str,
    env: dict[str, str],
    stdout: int | None,
) -> int:
    """Start ``inner(ready_fd, lock_fd)`` as the init of a new jail of ``jail``'s session
    in ``cwd`` (a path in the jail); return its host pid.

    The command writes one byte to ``ready_fd`` once it runs and keeps ``lock_fd``
    (the session's lock) open while it runs. ``stdout`` (a descriptor) becomes its
    stdout, else /dev/null. Raises :class:`SandboxDead` with bubblewrap's own words
    when the jail could not be made or the process did not start in time.
    """
    info_r, info_w = os.pipe2(os.O_CLOEXEC)
    ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
    lock = jail.dirs.hold()
    try:
        try:
            with jail.command(cwd=cwd, env=jail.environment(env), lock_fd=lock, info_fd=info_w) as (
                argv,
                args_fd,
            ):
                proc = subprocess.Popen(
                    argv + inner(ready_w, lock),
                    stdin=subprocess.DEVNULL,
                    stdout=stdout if stdout is not None else subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    cwd="/",
                    env=LAUNCH_ENV,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(info_w, ready_w, lock, args_fd),
                )
        finally:
            for fd in (info_w, ready_w, lock):
                os.close(fd)
        assert proc.stderr is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        info = _read(info_r, deadline, one_byte=False)
        if _read(ready_r, deadline, one_byte=True):
            proc.stderr.close()  # bubblewrap itself says nothing more once the jail runs
            return int(json.loads(info)["child-pid"])
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        if proc.poll() is None:
            proc.kill()
        said = _read(proc.stderr.fileno(), time.monotonic() + 5, one_byte=False)
        proc.stderr.close()
        why = said.decode("utf-8", "replace").strip() or "no word from bubblewrap"
        raise SandboxDead(f"the background process could not start in its jail: {why}")
    finally:
        os.close(info_r)
        os.close(ready_r)
