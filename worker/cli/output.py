"""How CLI commands report: exit codes and errors of CONTRACT.md, ``--json`` output."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DENIED = 3
EXIT_NOT_FOUND = 4


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
