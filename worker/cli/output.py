"""How CLI commands report: one-line errors with exit codes (docs/cli.md), ``--json`` output.

Exit codes come from :data:`worker.errors.EXIT_FOR_STATUS`, the one table from a
wire status to an exit code.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from worker.errors import EXIT_DENIED, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_USAGE

EXIT_OK = 0

__all__ = ["EXIT_DENIED", "EXIT_FAILURE", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "CliError"]


class CliError(Exception):
    """An error the CLI reports as one line on stderr with an exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def fail(message: str, status: int = EXIT_FAILURE) -> NoReturn:
    """Stop the command with ``message`` (one line on stderr) and ``status``."""
    raise CliError(message, status)


def emit(value: Any, *, as_json: bool, human: str | None = None) -> None:
    """Print ``value`` as one JSON document, or ``human`` text when not ``--json``."""
    if as_json:
        sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    elif human is not None:
        sys.stdout.write(human if human.endswith("\n") or not human else human + "\n")
    sys.stdout.flush()
