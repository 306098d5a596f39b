"""What one command in a session shell did, and its :class:`ExecResult`."""

from __future__ import annotations

import time
from dataclasses import dataclass

from environments.base import ExecResult
from environments.shell.output import OutputCapture


@dataclass(slots=True)
class ShellResult:
    """What one command did."""

    output: OutputCapture
    exit_code: int
    timed_out: bool
    cwd: str
    shell_restarted: bool
    cancelled: bool = False

    def exec_result(
        self, started: float, *, note: str = "", restarted: bool | None = None
    ) -> ExecResult:
        """The :class:`ExecResult` of this run; ``started`` is its ``time.monotonic()`` start.

        ``note`` is prepended to the output (a backend's word about the sandbox);
        ``restarted`` overrides ``shell_restarted``.
        """
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
