"""What one command in a session shell did, and its :class:`ExecResult`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from environments.base import ExecResult
from environments.shell.output import OutputCapture

TIMEOUT_EXIT_CODE = 124
CANCELLED_EXIT_CODE = 130


@dataclass(slots=True)
class ShellResult:
    """What one command did."""

    output: OutputCapture
    exit_code: int
    timed_out: bool
    cwd: str
    shell_restarted: bool
    cancelled: bool = False
    stray_bytes: int = 0
    """Bytes read ahead of the command's own output that it did not write (dropped)."""

    @classmethod
    def ended(
        cls,
        output: OutputCapture,
        status: int | None,
        timed_out: bool,
        cancelled: bool,
        cwd: str,
        restarted: bool,
        stray_bytes: int,
    ) -> ShellResult:
        """The result of a command that ended with ``status`` (None: its shell died and
        said nothing); a cancel or a timeout decides the exit code over the status."""
        if cancelled:
            code = CANCELLED_EXIT_CODE
        elif timed_out:
            code = TIMEOUT_EXIT_CODE
        elif status is None:
            code = -1
            output.feed(b"\n[sbx: the session shell died; it will be restarted]\n")
        else:
            code = status
        timed = timed_out and not cancelled
        return cls(output, code, timed, cwd, restarted, cancelled, stray_bytes)

    def exec_result(
        self, started: float, *, note: str = "", restarted: bool | None = None
    ) -> ExecResult:
        """The :class:`ExecResult` of this run; ``started`` is its ``time.monotonic()`` start.

        ``note`` is prepended to the output (a backend's word about the sandbox), and so
        is a word on :attr:`stray_bytes`; ``restarted`` overrides ``shell_restarted``.
        """
        if self.stray_bytes:
            note += stray_note(self.stray_bytes)
        return ExecResult(
            output=note + self.output.text(),
            exit_code=self.exit_code,
            timed_out=self.timed_out,
            truncated=self.output.truncated,
            output_bytes=self.output.total_bytes,
            cwd=self.cwd,
            duration_ms=int((time.monotonic() - started) * 1000),
            shell_restarted=self.shell_restarted if restarted is None else restarted,
            cancelled=self.cancelled,
        )


def stray_note(size: int) -> str:
    """What a result says when ``size`` bytes written between calls were dropped."""
    return (
        f"[sbx: dropped {size} bytes that a process left running by an earlier command "
        "wrote after that command ended; start such processes with background=true "
        "to keep their output]\n"
    )
