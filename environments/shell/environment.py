"""The ``exec`` every session-shell backend shares (local, docker, ssh, apptainer, modal).

A backend keeps its session shell as ``self.shell`` and the process groups it
killed during the current command as ``self._killed``; it adapts ``exec`` only
through two hooks: :meth:`ShellEnvironment._before_exec` (e.g. replace a shell
whose connection dropped since the last call) and
:meth:`ShellEnvironment._after_exec` (e.g. notice a sandbox that vanished).
:class:`SandboxShellEnvironment` fills both for backends whose sandbox can
vanish under them (a container, a cloud sandbox).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from environments.base import Environment, ExecResult, ShellIdentity, ShellState
from environments.errors import SandboxError
from environments.shell.driver import SessionShell
from environments.shell.result import ShellResult


class ShellEnvironment(Environment):
    """An :class:`Environment` whose commands run in one long-lived session shell."""

    streams_output: ClassVar[bool] = True
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
        on_output: Callable[[bytes], None] | None = None,
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
            on_output=on_output,
        )
        return self._after_exec(result, started)

    def session_state(self) -> ShellState | None:
        shell = self.shell
        if not shell.cwd:
            return None
        return ShellState(cwd=shell.cwd, env=dict(shell.env))

    def restore_session_state(self, state: ShellState) -> None:
        self.shell.restore(state.env, state.cwd)

    def detach(self) -> None:
        self.shell.close()

    def rest(self) -> None:
        self.shell.rest()

    def shell_identity(self) -> ShellIdentity | None:
        pid = self.shell.shell_pid
        if pid is None or not self.shell.alive:
            return None
        return ShellIdentity(pid=pid, start_time=self.shell.shell_start)

    def _before_exec(self) -> None:
        """Runs before each command; default: nothing."""

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        """The command's :class:`ExecResult`; backends add their word about the sandbox."""
        return result.exec_result(started)


class SandboxShellEnvironment(ShellEnvironment):
    """A session shell in a sandbox that may vanish between or during calls.

    Before a call, a shell whose stream already ended is dropped (the driver
    starts a new one). After a call whose shell died, :meth:`_check_sandbox`
    notices a sandbox that is gone and replaces it, setting ``_vanished``; the
    result then starts with :attr:`vanished_note` (or whatever
    :meth:`_take_sandbox_note` says) and says ``shell_restarted``.
    """

    vanished_note: ClassVar[str]
    _vanished: bool
    _closing: bool

    def _shell_stream_gone(self) -> bool:
        """True when the session shell's stream ended since the last call."""
        raise NotImplementedError

    def _check_sandbox(self) -> None:
        """Make sure the sandbox runs (replacing a vanished one sets ``_vanished``);
        raises :class:`~environments.errors.SandboxError` when it cannot."""
        raise NotImplementedError

    def _heartbeat(self) -> None:
        """Record the sandbox's activity after a call (for idle sweeps); default: nothing."""

    def _take_sandbox_note(self) -> str:
        """What the next result must say about the sandbox (``""``: nothing), said once.

        Default: :attr:`vanished_note` after a vanished sandbox was replaced. Backends
        whose sandbox can also come back without what it held (a restarted container)
        add their own word here."""
        if self._vanished:
            self._vanished = False
            return self.vanished_note
        return ""

    def _before_exec(self) -> None:
        self._closing = False
        if self._shell_stream_gone():
            self.shell.close()  # the shell (or its sandbox) ended since the last call

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        if not self.shell.alive and not result.timed_out:
            with contextlib.suppress(SandboxError):
                self._check_sandbox()  # notices (and replaces) a vanished sandbox
        note = self._take_sandbox_note()
        self._heartbeat()
        return result.exec_result(
            started, note=note, restarted=result.shell_restarted or bool(note)
        )
