"""The session's state as a command leaves it: the exported environment to keep.

A command's subshell reports its environment (``export -p``) when it exits; what of it
becomes session state is decided here, apart from how the report is read.
"""

from __future__ import annotations

from environments.shell.framing import parse_export_dump
from environments.shell.script import SHELL_MANAGED


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
    return {k: v for k, v in env.items() if k not in SHELL_MANAGED}
