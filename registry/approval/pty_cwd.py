"""Where a pty's shell is, as far as the lines typed into it tell.

A line typed into a pty shell is judged as a command, but the directory it runs
in is the shell's, which the worker does not see: ``cd /`` then ``rm -rf *`` as
two lines would be judged as an ``rm -rf *`` somewhere. :class:`PtyCwd` follows
the directory through the lines themselves. A plain ``cd DIR`` (one word, no
expansion, quoting or option other than ``--``) moves it: to ``DIR`` when that is
absolute, else from where it was when that is known. Any other line that could
move the shell (``cd`` with an expansion, ``pushd``, ``popd``, ``source``, ``.``,
``exec``, ``eval``, an alias or a function) makes it unknown, and so does a line
whose editing was not modelled.

The directory is a hint, used only to add blocks (a hard-line rule that matches
the line in that directory): a wrong hint can refuse a line, never let through
one the check without it refuses.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import Protocol

__all__ = ["PtyCwd", "start_dir"]

_PLAIN_CD = re.compile(r"\s*cd(?:\s+--)?\s+(?P<dir>[A-Za-z0-9_./+,:@%=-]+)\s*;?\s*\Z")
# A word that may move the shell, where a command may start; or a function definition.
_MOVERS = re.compile(
    r"(?:\A|[\s;&|(){}`!])(?:cd|pushd|popd|source|\.|exec|eval|alias|function)(?=[\s;&|()]|\Z)"
    r"|\(\s*\)"
)


class _Line(Protocol):
    @property
    def text(self) -> str: ...
    @property
    def complete(self) -> bool: ...
    @property
    def opaque(self) -> str | None: ...


class PtyCwd:
    """The directory of one pty's shell as its typed lines tell (module docstring)."""

    def __init__(self, start: str | None = None) -> None:
        """``start``: where the shell started, when known (an absolute path)."""
        self.current = start if start is not None and posixpath.isabs(start) else None

    def along(self, lines: Iterable[_Line]) -> list[str | None]:
        """The directory each of ``lines`` runs in (None: unknown), typed in this order
        from :attr:`current`, which is not changed."""
        out = []
        here = self.current
        for line in lines:
            out.append(here)
            here = _after(here, line)
        return out

    def advance(self, lines: Iterable[_Line]) -> None:
        """Follow ``lines``, which the shell received."""
        for line in lines:
            self.current = _after(self.current, line)


def start_dir(session_cwd: str | None, workdir: str | None) -> str | None:
    """Where a process started with ``workdir`` (None: none given) in a session whose
    directory is ``session_cwd`` (None: unknown) runs: None when that is not known."""
    if workdir and posixpath.isabs(workdir):
        return posixpath.normpath(workdir)
    if session_cwd is None or not posixpath.isabs(session_cwd):
        return None
    return posixpath.normpath(posixpath.join(session_cwd, workdir or "."))


def _after(here: str | None, line: _Line) -> str | None:
    if not line.complete:
        return here  # not run yet
    if line.opaque is not None:
        return None
    plain = _PLAIN_CD.match(line.text)
    if plain is not None:
        target = plain["dir"]
        if target.startswith("-"):
            return None  # ``cd -``, an option: not followed
        if posixpath.isabs(target):
            return posixpath.normpath(target)
        return None if here is None else posixpath.normpath(posixpath.join(here, target))
    return None if _MOVERS.search(line.text) else here
