"""Bounds on what one approval check may cost.

Contract: a command longer than the configured maximum
(:data:`DEFAULT_MAX_COMMAND_BYTES` unless ``approvals.max_command_bytes`` says
otherwise) is refused before any analysis: the guard raises
:class:`CommandTooLong`; the detection functions, which never raise, report
it as the dangerous finding ``command_too_long``. Every accepted command is
analysed under a :class:`Budget` of lexer items, simple commands, nested
scripts and analysed text; when it runs out the analysis stops and reports
``analysis_budget_exhausted``, which needs approval (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_COMMAND_BYTES", "Budget", "CommandTooLong", "command_bytes"]

DEFAULT_MAX_COMMAND_BYTES = 64 * 1024


class CommandTooLong(ValueError):
    """The command is longer than the configured maximum; nothing was analysed or run."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(
            f"command is {length} bytes, more than the {limit}-byte limit "
            "(approvals.max_command_bytes); split it or write it to a file first"
        )
        self.length = length
        self.limit = limit


def command_bytes(command: str, limit: int) -> int:
    """UTF-8 length of ``command``, computed only as far as needed to compare with ``limit``."""
    if len(command) > limit:
        return len(command)  # every character takes at least one byte
    return len(command.encode("utf-8", errors="surrogatepass"))


@dataclass
class Budget:
    """Work left for one analysis; each ``spend_*`` returns False once its own kind ran out.

    Running out of anything sets ``exhausted``: the analysis is incomplete.

    Defaults bound the analysis of any accepted command to well under a second
    and a few megabytes on one core: every unit is linear work.
    """

    items: int = 20_000  # lexer items (words, operators, redirections), all scripts together
    commands: int = 1_000  # simple commands analysed, all scripts together
    scripts: int = 256  # nested scripts analysed (bash -c, eval, heredocs fed to shells, ...)
    chars: int = 262_144  # characters of script text analysed, all scripts together
    exhausted: bool = False

    def spend_script(self, length: int) -> bool:
        self.scripts -= 1
        self.chars -= length
        ok = self.scripts >= 0 and self.chars >= 0
        self.exhausted = self.exhausted or not ok
        return ok

    def spend_items(self, count: int) -> bool:
        self.items -= count
        ok = self.items >= 0
        self.exhausted = self.exhausted or not ok
        return ok

    def spend_command(self) -> bool:
        self.commands -= 1
        ok = self.commands >= 0
        self.exhausted = self.exhausted or not ok
        return ok
