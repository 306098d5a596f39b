"""Interactive approval prompt for ``sbx exec`` on a terminal.

Contract: :func:`prompt_for_approval` shows the command and why it was
flagged, asks once / session / always / deny, and returns the answer. It
returns ``"deny"`` on EOF, on timeout, on an empty answer and after
``max_attempts`` unrecognised answers: silence is not consent. Streams are
parameters so the CLI passes ``sys.stdin``/``sys.stderr`` and tests pass
pipes or ``io.StringIO``. The command is shown with control and invisible
formatting characters escaped, so a command cannot repaint the terminal or
reorder its own text to disguise itself.
"""

from __future__ import annotations

import select
import unicodedata
from typing import Literal, TextIO

from registry.approval.shell.normalize import strip_ansi

__all__ = ["Answer", "prompt_for_approval", "safe_display"]

Answer = Literal["once", "session", "always", "deny"]

_ANSWERS: dict[str, Answer] = {
    "o": "once",
    "once": "once",
    "y": "once",
    "yes": "once",
    "s": "session",
    "session": "session",
    "a": "always",
    "always": "always",
    "d": "deny",
    "deny": "deny",
    "n": "deny",
    "no": "deny",
}


def safe_display(text: str, limit: int = 2000) -> str:
    """``text`` with escape sequences removed and every character that could change how
    the rest is shown escaped (``\\xNN`` / ``\\uNNNN``): control characters other than
    newline and tab, and invisible formatting characters -- bidirectional overrides and
    isolates, zero-width characters, line and paragraph separators -- so a command cannot
    reorder or hide part of itself on the person's screen."""
    shown = "".join(_shown(ch) for ch in strip_ansi(text))
    return (
        shown
        if len(shown) <= limit
        else shown[:limit] + f"... ({len(shown) - limit} more characters)"
    )


# Cc: control characters; Cf: formatting (bidi controls, zero-width joiners, BOM, tags);
# Zl/Zp: line and paragraph separators; Cs: lone surrogates (from undecodable bytes).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _shown(ch: str) -> str:
    if ch in "\n\t" or (" " <= ch < "\x7f"):
        return ch
    if unicodedata.category(ch) not in _HIDDEN_CATEGORIES:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _readline(stream: TextIO, timeout: float | None) -> str | None:
    """One line from ``stream``; None on EOF or timeout (timeout needs a real file descriptor)."""
    if timeout is not None:
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is not None:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
    line = stream.readline()
    return line if line else None


def prompt_for_approval(
    command: str,
    description: str,
    *,
    stdin: TextIO,
    stdout: TextIO,
    timeout: float | None = 120.0,
    max_attempts: int = 3,
) -> Answer:
    """Ask the person at the terminal about ``command`` (see module docstring)."""
    stdout.write("\nDangerous command requires approval\n")
    stdout.write(f"  reason : {safe_display(description, 200)}\n")
    stdout.write("  command: " + safe_display(command).replace("\n", "\n           ") + "\n")
    for _ in range(max(1, max_attempts)):
        stdout.write("Allow? [o]nce / [s]ession / [a]lways / [D]eny: ")
        stdout.flush()
        line = _readline(stdin, timeout)
        if line is None:
            stdout.write("\nno answer; denied\n")
            stdout.flush()
            return "deny"
        answer = line.strip().lower()
        if not answer:
            return "deny"
        if answer in _ANSWERS:
            return _ANSWERS[answer]
        stdout.write(f"unrecognised answer {safe_display(answer, 40)!r}\n")
    stdout.write("denied\n")
    stdout.flush()
    return "deny"
