"""A long-lived session shell driven over any byte stream (docs/architecture.md).

:class:`SessionShell` owns one shell process reached through a
:class:`Channel` -- local pipes, a docker attach socket, an SSH channel, an
SDK process stream -- and runs commands in it with the framing of
:mod:`environments.shell.framing`. The session's cwd and exported environment
persist between commands; a dead shell is restarted and its state replayed.
"""

from __future__ import annotations

import secrets
import signal
import threading
import time
from collections.abc import Callable

from environments.errors import SandboxDead, WorkdirNotFound
from environments.shell.channel import Channel, GroupKiller
from environments.shell.framing import (
    KIND_CWD,
    KIND_END,
    KIND_ENV,
    KIND_EXIT,
    KIND_NO_WORKDIR,
    KIND_PGID,
    Marker,
    MarkerScanner,
    Output,
    marker_number,
)
from environments.shell.output import OutputCapture
from environments.shell.reaping import reap_group, signal_group
from environments.shell.result import ShellResult
from environments.shell.script import (
    PARENT_UNSAFE,
    REBASE_BYTES,
    REBASE_REQUEST,
    REBASE_STATUS,
    bootstrap_script,
    command_script,
    restore_lines,
    restore_statements,
    run_line,
    serve_line,
    statements_line,
)
from environments.shell.state import DumpParser, adopted_env, read_start_report

_CANCEL_POLL_S = 0.05  # how often a running command checks its cancel event
_SHELL_PATIENCE_S = 5.0  # a shell that stops answering, before it is replaced (>= kill grace)


class SessionShell:
    """One session shell; not thread-safe (the caller serialises calls per session).

    ``open_channel`` starts a fresh shell (``sh -s`` or ``bash -s`` reading its
    script from stdin) and returns its channel. ``kill_group`` signals a process
    group inside the sandbox. ``kill_grace`` is the time between TERM and KILL
    when a command times out.
    """

    def __init__(
        self,
        open_channel: Callable[[], Channel],
        kill_group: GroupKiller,
        *,
        kill_grace: float = 2.0,
        start_timeout: float = 30.0,
    ) -> None:
        self._open_channel = open_channel
        self._kill_group = kill_group
        self.kill_grace = kill_grace
        self.start_timeout = start_timeout
        self._channel: Channel | None = None
        self._scanner: MarkerScanner | None = None
        # What the session should look like, and what the live shell has now.
        self.env: dict[str, str] = {}
        self.cwd = ""
        self._shell_env: dict[str, str] = {}
        self._shell_cwd = ""
        self._start_cwd = ""
        self._started_once = False
        self.restarts = 0
        self._resting = False
        self.shell_pid: int | None = None
        """Pid of the live shell in the sandbox's pid namespace (None: not started)."""
        self.shell_start: int | None = None
        """Kernel start time of :attr:`shell_pid` (None where ``/proc`` is missing)."""
        self._dumps = DumpParser()
        # The parent shell's E of the last command is still to come (its X answered).
        self._end_pending = False
        # The shell forks each command's subshell ahead (script.py); set at start.
        self._serving = False

    # -- lifecycle -------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True while a shell is attached."""
        return self._channel is not None

    def start(self) -> None:
        """Start the shell if none is running; replay the session state into it."""
        if self._channel is not None:
            return
        token = secrets.token_hex(16)
        channel = self._open_channel()
        scanner = MarkerScanner(token.encode())
        try:
            channel.write(bootstrap_script(token))
            env, cwd, self.shell_pid, self.shell_start, self._serving = read_start_report(
                channel, scanner, self.start_timeout
            )
        except BaseException:
            channel.close()
            raise
        self._channel, self._scanner = channel, scanner
        self._end_pending = False
        self._shell_env, self._shell_cwd = env, cwd
        self._start_cwd = cwd
        if not self._started_once:
            self.env, self.cwd = dict(env), cwd
            self._started_once = True
        elif self._resting:
            self._resting = False  # a planned restart: nothing was lost
        else:
            self.restarts += 1

    def restore(self, env: dict[str, str], cwd: str) -> None:
        """Make ``env`` and ``cwd`` the session's state (continued from another worker);
        the next command replays them into the shell, started or not (one started next is
        no restart: nothing was lost)."""
        self.env, self.cwd = dict(env), cwd
        self._resting = self._channel is None or self._resting
        self._started_once = True

    def rest(self) -> None:
        """End an idle shell on purpose: the next command starts a new one with the
        session's state, and that is not reported as a restart."""
        if self._channel is not None:
            self._resting = True
        self.close()

    def close(self) -> None:
        """Terminate the shell. The session state is kept for a later :meth:`start`."""
        channel, self._channel, self._scanner = self._channel, None, None
        if channel is not None:
            channel.close()

    # -- commands --------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float,
        output_limit: int,
        cancel: threading.Event | None = None,
        on_output: Callable[[bytes], None] | None = None,
    ) -> ShellResult:
        """Run ``command`` in the session; see :meth:`environments.base.Environment.exec`.

        Setting ``cancel`` stops the command like a timeout does (its tree is
        killed), and the result says ``cancelled``. ``on_output`` gets every piece
        of the command's output as it is read (never the framing markers).
        """
        script = command_script(command, workdir, env)
        overrides = dict(env or {})
        restarts_before = self.restarts
        for attempt in (1, 2):
            channel, scanner = self._send(script, workdir)
            try:
                return self._collect(
                    channel, scanner, workdir, overrides, timeout, output_limit,
                    self.restarts > restarts_before, cancel, on_output,
                )  # fmt: skip
            except _ShellWasGone:
                # The shell died or stalled before it read our command: nothing ran, so
                # retry once (on a new shell).
                if attempt == 2:
                    raise SandboxDead("the session shell died before it ran the command") from None
            except WorkdirNotFound:
                raise  # answered in full: the shell is where it was
            except BaseException:
                # The command's end was not seen (say, killing it failed): the shell may still
                # run it, and the next command would queue behind it. A new shell it is.
                self.close()
                raise
        raise AssertionError("unreachable")

    def _send(self, script: str, workdir: str | None) -> tuple[Channel, MarkerScanner]:
        """Hand the command to a live shell. A shell found dead (say, killed by the last
        command) is replaced once: the failed write means nothing ran."""
        for attempt in (1, 2):
            if self._channel is None:
                self.start()
            channel, scanner = self._channel, self._scanner
            assert channel is not None and scanner is not None
            try:
                channel.write(self._command_line(channel, scanner, script, workdir))
            except OSError as exc:
                self.close()
                if attempt == 2:
                    raise SandboxDead(f"session shell is gone: {exc}") from exc
                continue
            return channel, scanner
        raise AssertionError("unreachable")

    def _command_line(
        self, channel: Channel, scanner: MarkerScanner, script: str, workdir: str | None
    ) -> bytes:
        """What to write for ``script``; moves a serving shell's parent first when the
        session's state drifted far from it. Raises OSError and SandboxDead."""
        if not self._serving:
            line = restore_lines(self._shell_env, self.env, self._shell_cwd, self.cwd)
            self._shell_env, self._shell_cwd = dict(self.env), self.cwd
            return line + run_line(script, workdir)
        statements = restore_statements(self._shell_env, self.env, self._shell_cwd, self.cwd)
        if sum(len(s) for s in statements) > REBASE_BYTES:
            channel.write(REBASE_REQUEST)
            # Only a parent that saw the request's status reads the statements next. The
            # parent keeps its cwd: each command's line moves there, and says if it is gone.
            if marker_number(self._await_end(channel, scanner)) == REBASE_STATUS:
                kept = {k: v for k, v in self.env.items() if k not in PARENT_UNSAFE}
                for name in PARENT_UNSAFE & self._shell_env.keys():
                    kept[name] = self._shell_env[name]
                moves = restore_statements(self._shell_env, kept, "", "")
                self._shell_env = kept
                then = restore_statements(kept, self.env, self._shell_cwd, self.cwd)
                return statements_line(moves, then, script, workdir)
        return serve_line(statements, script, workdir)

    def _await_end(self, channel: Channel, scanner: MarkerScanner) -> bytes:
        """Read up to the parent's end marker of a line that runs no command; its status."""
        deadline = time.monotonic() + self.start_timeout
        taken = False  # a subshell reported its pid: it took the line
        while True:
            chunk = channel.read(max(0.0, deadline - time.monotonic()))
            if not chunk:
                self.close()
                raise SandboxDead("the session shell did not answer a state update")
            for event in scanner.feed(chunk):
                if not isinstance(event, Marker):
                    continue
                if event.kind == KIND_PGID:
                    taken = True
                elif event.kind == KIND_END and self._end_pending:
                    self._end_pending = False
                elif event.kind == KIND_END and taken:
                    return event.payload

    def _collect(
        self,
        channel: Channel,
        scanner: MarkerScanner,
        workdir: str | None,
        overrides: dict[str, str],
        timeout: float,
        output_limit: int,
        restarted: bool,
        cancel: threading.Event | None,
        on_output: Callable[[bytes], None] | None = None,
    ) -> ShellResult:
        capture = OutputCapture(output_limit)
        pgid: int | None = None
        # Output read before a serving shell's subshell reports its pid cannot be this
        # command's: processes an earlier command left running wrote it between calls.
        stray = 0
        new_env: dict[str, str] | None = None
        new_cwd: str | None = None
        exit_code: int | None = None
        no_workdir = lost_cwd = False
        late = False  # the deadline passed before the command's group was reported
        phase = "run"  # run -> term -> kill -> wedged
        deadline = time.monotonic() + timeout
        cancelled = False
        patience = max(self.kill_grace, _SHELL_PATIENCE_S)
        # The parent has not ended the last command yet: it may never (stopped, say), and
        # then no subshell takes this line. Checked until the pid marker or that end comes.
        stall_at = time.monotonic() + patience if self._end_pending else None
        while exit_code is None:
            wait = max(0.0, deadline - time.monotonic())
            if cancel is not None and phase == "run":
                wait = min(wait, _CANCEL_POLL_S)
            if stall_at is not None:
                wait = min(wait, max(0.0, stall_at - time.monotonic()))
            chunk = channel.read(wait)
            if chunk is None and stall_at is not None and time.monotonic() >= stall_at:
                # Nothing took the line, so nothing ran: replace the shell (closing it
                # kills its tree) and let the caller run the command on a new one.
                self.close()
                raise _ShellWasGone()
            if chunk is None and phase == "run" and time.monotonic() < deadline:
                if cancel is None or not cancel.is_set():
                    continue
                cancelled = True
                if late:
                    continue  # its group's report ends it
            if chunk is None:
                if phase == "run" and pgid is None and not late:
                    # The command's group is not known yet (the deadline came before its
                    # report, over a slow stream, say): wait for it, so that what ends is
                    # the command, not the whole shell.
                    late, deadline = True, time.monotonic() + patience
                    continue
                if phase == "run":
                    phase, deadline = "term", time.monotonic() + self.kill_grace
                    signal_group(self._kill_group, pgid, signal.SIGTERM)
                elif phase == "term":
                    phase, deadline = "kill", time.monotonic() + patience
                    signal_group(self._kill_group, pgid, signal.SIGKILL)
                else:
                    # The shell itself does not answer: replace it.
                    self.close()
                    break
                if pgid is None:
                    # No process group reported yet: the shell itself is stuck.
                    self.close()
                    break
                continue
            if chunk == b"":
                self.close()
                if pgid is None and capture.total_bytes == 0 and exit_code is None:
                    raise _ShellWasGone()
                break
            for event in scanner.feed(chunk):
                if isinstance(event, Output):
                    if pgid is None and self._serving:
                        stray += len(event.data)
                        continue
                    capture.feed(event.data)
                    if on_output is not None:
                        on_output(event.data)
                elif event.kind == KIND_PGID:
                    pgid = marker_number(event.payload)
                    stall_at = None
                    if late and phase == "run":
                        phase, deadline = "term", time.monotonic() + self.kill_grace
                        signal_group(self._kill_group, pgid, signal.SIGTERM)
                elif event.kind == KIND_ENV:
                    new_env = self._dumps.parse(event.payload)
                elif event.kind == KIND_CWD:
                    new_cwd = event.payload.decode("utf-8", "surrogateescape")
                elif event.kind == KIND_NO_WORKDIR:
                    no_workdir, lost_cwd = True, event.payload == b"cwd"
                elif event.kind == KIND_EXIT:
                    # The subshell's own report: answer now; the parent's E follows.
                    exit_code = _status(event.payload)
                    self._end_pending = True
                elif event.kind == KIND_END:
                    if self._end_pending:
                        # The parent's end of a command already answered by its X.
                        self._end_pending = False
                        stall_at = None
                    elif self._serving and pgid is None:
                        # A waiting subshell ended before it took a line (its pid comes
                        # first); the parent forked another, which takes ours.
                        continue
                    else:
                        # No X (killed, no workdir, trap replaced): the parent's word it is.
                        exit_code = _status(event.payload)
        timed_out = phase != "run" or late
        if timed_out and exit_code is not None and pgid is not None:
            reap_group(self._kill_group, pgid, phase == "term", deadline)
        if lost_cwd:
            gone, self.cwd = self.cwd, self._start_cwd
            self._shell_cwd = ""  # a parent that was to move there is somewhere else
            raise WorkdirNotFound(
                f"the session's working directory {gone} no longer exists (nothing was run); "
                f"the session is now in {self.cwd}",
                cwd=self.cwd,
            )
        if no_workdir:
            raise WorkdirNotFound(
                f"workdir does not exist: {workdir} (nothing was run)", cwd=self.cwd
            )
        if not timed_out and exit_code is not None and new_env is not None:
            self.env = adopted_env(new_env, overrides, self.env)
            if new_cwd and not workdir:
                self.cwd = new_cwd
        return ShellResult.ended(
            capture, exit_code, timed_out, cancelled, self.cwd, restarted, stray
        )


class _ShellWasGone(Exception):
    """The shell ended, or stopped answering, before the command started (no pid marker,
    no output): nothing ran."""


def _status(payload: bytes) -> int:
    return -1 if (parsed := marker_number(payload)) is None else parsed
