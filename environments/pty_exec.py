"""A foreground command on a pseudo-terminal, over the Environment contract.

The ``terminal`` tool's ``pty: true`` without ``background`` runs here, on backends
with :attr:`~environments.base.Environment.supports_pty`: the command is spawned on a
pty (:meth:`~environments.base.Environment.spawn_on_pty`), waited for, and answered
as a foreground result. It differs from a session-shell command in what a terminal
changes:

* the command's stdin, stdout and stderr are the terminal (``[ -t 0 ]`` holds);
  its output is what a terminal shows: ``\\r\\n`` line ends, prompts, colours;
* its stdin has nothing typed: a command that waits for input runs to its timeout;
* it starts in the session's cwd and environment (or ``workdir``), but what it
  changes there (``cd``, ``export``) is not kept: it is not the session shell.

A timeout or a cancellation kills its whole process group (TERM, the grace, KILL),
exit code 124 or 130, as for any foreground command.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import tempfile
import threading
import time
from functools import cache

from environments.base import Environment, ExecResult, SpawnedProcess
from environments.errors import SandboxError
from environments.shell.framing import shell_quote
from environments.shell.output import OutputCapture

_READ_CHUNK = 1 << 20
_POLL_MIN_S, _POLL_MAX_S = 0.005, 0.05


@cache
def _host_spool() -> str:
    """A private directory (0700) for the output files of pty commands run on this host."""
    return tempfile.mkdtemp(prefix=f"sbx-{os.getuid()}-pty-")


def run_on_pty(
    env: Environment,
    command: str,
    *,
    workdir: str | None = None,
    timeout: float = 180.0,
    output_limit: int = 100_000,
    cancel: threading.Event | None = None,
    kill_grace: float = 2.0,
) -> ExecResult:
    """Run ``command`` on a pty in ``env`` and wait for it (see module docstring).

    Raises ``Unsupported`` on a backend without a pty,
    :class:`~environments.errors.WorkdirNotFound` (nothing ran) for a missing
    ``workdir``, and :class:`~environments.errors.SandboxError` when the command
    ended without a recorded status.
    """
    cancel = cancel or threading.Event()
    started = time.monotonic()
    output_path, status_path = env.process_paths("fg" + secrets.token_hex(8), _host_spool())
    spawned = env.spawn_on_pty(
        command, output_path=output_path, status_path=status_path, workdir=workdir
    )
    try:
        ended = _wait(env, spawned, started + timeout, cancel)
        if not ended:
            _kill(env, spawned, kill_grace)
        capture = _read_all(env, output_path, output_limit)
        status = _status(env, status_path)
    finally:
        _remove(env, output_path, status_path)
    cancelled = not ended and cancel.is_set()
    timed_out = not ended and not cancelled
    if cancelled or timed_out:
        code = 130 if cancelled else 124
    elif status is None:
        raise SandboxError("the pty command ended without recording its exit status")
    else:
        code = status
    state = env.session_state()
    return ExecResult(
        output=capture.text(),
        exit_code=code,
        timed_out=timed_out,
        truncated=capture.truncated,
        output_bytes=capture.total_bytes,
        cwd=state.cwd if state is not None else (workdir or ""),
        duration_ms=int((time.monotonic() - started) * 1000),
        cancelled=cancelled,
    )


def _wait(
    env: Environment, spawned: SpawnedProcess, deadline: float, cancel: threading.Event
) -> bool:
    """True once the command ended; False at the deadline or on cancellation."""
    pause = _POLL_MIN_S
    while env.is_running(spawned):
        left = deadline - time.monotonic()
        if left <= 0 or cancel.wait(min(pause, left)):
            return not env.is_running(spawned)
        pause = min(pause * 2, _POLL_MAX_S)
    return True


def _kill(env: Environment, spawned: SpawnedProcess, grace: float) -> None:
    """TERM the command's group, KILL what is left after ``grace``; return once it is gone."""
    env.signal(spawned, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while env.signal(spawned, 0) and time.monotonic() < deadline:
        time.sleep(_POLL_MIN_S)  # nothing to block on: the group is another process tree
    env.signal(spawned, signal.SIGKILL)
    deadline = time.monotonic() + max(grace, 5.0)
    while env.is_running(spawned) and time.monotonic() < deadline:
        time.sleep(_POLL_MIN_S)


def _read_all(env: Environment, path: str, limit: int) -> OutputCapture:
    capture = OutputCapture(limit)
    offset = 0
    while True:
        window = env.read_output(path, offset, _READ_CHUNK)
        capture.feed(window.data)
        offset = window.start + len(window.data)
        if not window.data or offset >= window.size:
            return capture


def _status(env: Environment, path: str) -> int | None:
    try:
        text = env.read_file(path).decode(errors="replace").strip()
    except (OSError, SandboxError):
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def _remove(env: Environment, *paths: str) -> None:
    """Remove the command's files: on this host directly, else with one command."""
    if env.processes_on_worker_host:
        for path in paths:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return
    with contextlib.suppress(Exception):  # a leftover file in the sandbox's /tmp is harmless
        env.exec("rm -f -- " + " ".join(shell_quote(p) for p in paths), timeout=30)
