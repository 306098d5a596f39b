"""The session's state as a shell reports it: at its start, and as a command leaves it.

A new shell reports its environment, cwd and identity once (:func:`read_start_report`);
a command's subshell reports its environment (``export -p``) when it exits, and what of
it becomes session state is decided here (:func:`adopted_env`).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from environments.errors import SandboxDead
from environments.shell.channel import Channel
from environments.shell.framing import (
    KIND_CWD,
    KIND_ENV,
    KIND_READY,
    Marker,
    MarkerScanner,
    marker_number,
    parse_export_dump,
)
from environments.shell.script import SERVING, SHELL_MANAGED


class StartReport(NamedTuple):
    """What a new session shell reports once its bootstrap script ran."""

    env: dict[str, str]
    cwd: str
    pid: int | None
    """The shell's pid in the sandbox."""
    start_time: int | None
    """The shell's kernel start time (None where ``/proc`` is missing)."""
    serving: bool
    """The shell forks each command's subshell ahead of its line."""


def read_start_report(channel: Channel, scanner: MarkerScanner, timeout: float) -> StartReport:
    """Read the start report of the shell on ``channel``. Raises
    :class:`~environments.errors.SandboxDead` when the shell exits first or says nothing
    for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    env: dict[str, str] = {}
    cwd = ""
    while True:
        chunk = channel.read(max(0.0, deadline - time.monotonic()))
        if chunk is None:
            raise SandboxDead("session shell did not start in time")
        if chunk == b"":
            raise SandboxDead("session shell exited during start-up")
        for event in scanner.feed(chunk):
            if not isinstance(event, Marker):
                continue
            if event.kind == KIND_ENV:
                env = parse_export_dump(event.payload)
            elif event.kind == KIND_CWD:
                cwd = event.payload.decode("utf-8", "surrogateescape")
            elif event.kind == KIND_READY:
                fields = event.payload.split(b" ")
                start = fields[1] if len(fields) > 1 else b""
                serving = fields[2:] == [SERVING.encode()]
                return StartReport(
                    env, cwd, marker_number(fields[0]), marker_number(start), serving
                )


class DumpParser:
    """Parses ``export -p`` dumps; most commands change nothing, so the last parse is
    reused for an identical dump."""

    def __init__(self) -> None:
        self._dump = b""
        self._env: dict[str, str] = {}

    def parse(self, dump: bytes) -> dict[str, str]:
        """The variables of ``dump`` (a fresh dict the caller may change)."""
        if dump != self._dump:
            self._dump, self._env = dump, parse_export_dump(dump)
        return dict(self._env)


def adopted_env(
    reported: dict[str, str], overrides: dict[str, str], session: dict[str, str]
) -> dict[str, str]:
    """The session's environment after a command that reported ``reported``, run with the
    per-call ``overrides`` on top of ``session``: a per-call value is not session state
    unless the command changed it, and the variables the shell manages are never kept."""
    env = dict(reported)
    for name, value in overrides.items():
        if env.get(name) == value:
            if name in session:
                env[name] = session[name]
            else:
                env.pop(name, None)
    # Names of sbx's own (``__sbx*``) would change how the session shell speaks if kept.
    return {k: v for k, v in env.items() if k not in SHELL_MANAGED and not k.startswith("__sbx")}
