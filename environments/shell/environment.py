"""The ``exec`` every session-shell backend shares (local, docker, ssh, apptainer).

A backend keeps its session shell as ``self.shell`` and the process groups it
killed during the current command as ``self._killed``; it adapts ``exec`` only
through two hooks: :meth:`ShellEnvironment._before_exec` (e.g. replace a shell
whose connection dropped since the last call) and
:meth:`ShellEnvironment._after_exec` (e.g. notice a sandbox that vanished).
"""

from __future__ import annotations

import threading
import time

from environments.base import Environment, ExecResult
from environments.shell.driver import SessionShell, ShellResult


class ShellEnvironment(Environment):
    """An :class:`Environment` whose commands run in one long-lived session shell."""

    shell: SessionShell
    _killed: dict[int, set[int]]

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
        started = time.monotonic()
        self._before_exec()
        self._killed.clear()
        # SessionShell.run itself replaces a shell found dead before the command started.
        result = self.shell.run(
            command,
            workdir=workdir,
            env=env,
            timeout=timeout,
            output_limit=output_limit,
            cancel=cancel,
        )
        return self._after_exec(result, started)

    def _before_exec(self) -> None:
        """Runs before each command; default: nothing."""

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        """The command's :class:`ExecResult`; backends add their word about the sandbox."""
        return result.exec_result(started)
