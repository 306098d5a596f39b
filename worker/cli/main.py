"""The ``sbx`` command line (docs/cli.md)."""

from __future__ import annotations

import argparse
import logging
import sys

from worker.errors import SbxError, exit_code_for

from .commands import add_core_commands
from .files import add_cp_command
from .mcp_command import add_mcp_command
from .output import EXIT_FAILURE, EXIT_USAGE, CliError
from .process_commands import add_process_commands
from .session_commands import add_session_commands


class _Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and a one-line error, as docs/cli.md says."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"sbx: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sbx", description="Remote sandbox orchestration worker.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_core_commands(sub)
    add_process_commands(sub)
    add_session_commands(sub)
    add_cp_command(sub)
    add_mcp_command(sub)
    from .demo import add_demo_command
    from .health import add_health_command

    add_demo_command(sub)
    add_health_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sbx`` console script; returns the exit status."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except CliError as exc:
        sys.stderr.write(f"sbx: {exc}\n")
        return exc.status
    except SbxError as exc:  # every sbx error says its own exit code through its status
        sys.stderr.write(f"sbx: {exc}\n")
        return exit_code_for(exc.status)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line, never a traceback
        sys.stderr.write(f"sbx: {type(exc).__name__}: {exc}\n")
        return EXIT_FAILURE
    return status


if __name__ == "__main__":
    raise SystemExit(main())
