"""Input typed into a pty as a program *without* a line editor receives it.

A shell with readline (bash) edits what is typed itself; a program without
one (``sh`` where that is dash, ``read``, ``cat``, most REPLs started without
readline) gets the line as the kernel's canonical mode assembles it, where
most editing keys are ordinary characters: ``rm -rf DIR \\x01#`` is
``rm -rf DIR '\\x01#'`` there, while readline moves to the start and makes
the line a comment. Which of the two reads the input is not known, so the
guard judges every line both ways (:class:`~registry.approval.pty.PtyLineBuffer`).

Contract of :class:`CookedLineBuffer`: Linux's default ``termios`` (``ICANON``,
``ICRNL``, ``ISIG``, ``IEXTEN``, ``IXON``): CR is Enter; DEL erases a character,
Ctrl-U the line, Ctrl-W a word (as ``n_tty`` does: back over non-alphanumerics
to the first alphanumeric, then to the next non-alphanumeric); Ctrl-V makes the
next character literal; Ctrl-C, Ctrl-\\ and Ctrl-Z discard what was typed (the
signal flushes the input and the shell drops the unfinished command); Ctrl-D
ends nothing it can be seen to (mid-line it hands the line over without an
Enter; on an empty line it is end of file); Ctrl-Q and Ctrl-S are flow
control. Every other character, escape sequences included, is text. A line is
handed over, with the lines it continues, as ``(text, complete)`` on every
Enter, complete as ``complete(text)`` says. Never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CookedLineBuffer"]

_DISCARD = frozenset("\x03\x1c\x1a")  # INTR, QUIT, SUSP
_IGNORED = frozenset("\x04\x11\x13")  # EOF (see the module docstring), START, STOP


@dataclass
class _Cooked:
    line: list[str] = field(default_factory=list)
    logical: list[str] = field(default_factory=list)
    size: int = 0  # characters in logical, separators included
    literal_next: bool = False

    def copy(self) -> _Cooked:
        return _Cooked(list(self.line), list(self.logical), self.size, self.literal_next)

    def text(self) -> str:
        return "\n".join([*self.logical, "".join(self.line)])


class CookedLineBuffer:
    """Canonical-mode model of one pty's input (module docstring)."""

    def __init__(self, complete: Callable[[str], bool], max_pending: int) -> None:
        self._complete = complete
        self.max_pending = max_pending
        self._state = _Cooked()

    def reset(self) -> None:
        """Forget everything typed."""
        self._state = _Cooked()

    def peek(self, data: str) -> list[tuple[str, bool]]:
        """The lines writing ``data`` would hand over, leaving the buffer unchanged."""
        return self._apply(self._state.copy(), data)

    def feed(self, data: str) -> list[tuple[str, bool]]:
        """Apply ``data`` and return the lines it handed over."""
        return self._apply(self._state, data)

    def _apply(self, st: _Cooked, data: str) -> list[tuple[str, bool]]:
        out: list[tuple[str, bool]] = []
        for ch in data:
            if st.literal_next:
                st.literal_next = False
                st.line.append(ch)
            elif ch in "\r\n":
                text = st.text()
                complete = self._complete(text)
                out.append((text, complete))
                if complete:
                    _clear(st)
                else:
                    physical = "".join(st.line)
                    st.logical.append(physical)
                    st.size += len(physical) + 1
                    st.line.clear()
            elif ch == "\x7f":
                if st.line:
                    st.line.pop()
            elif ch == "\x15":
                st.line.clear()
            elif ch == "\x17":
                _werase(st.line)
            elif ch == "\x16":
                st.literal_next = True
            elif ch in _DISCARD:
                _clear(st)
            elif ch not in _IGNORED:
                st.line.append(ch)
            if len(st.line) + st.size > self.max_pending:
                out.append((st.text(), True))
                _clear(st)
        return out


def _clear(st: _Cooked) -> None:
    st.line.clear()
    st.logical.clear()
    st.size = 0


def _werase(line: list[str]) -> None:
    """Ctrl-W as ``n_tty`` does it: trailing non-alphanumerics, then alphanumerics."""
    while line and not (line[-1].isalnum() or line[-1] == "_"):
        line.pop()
    while line and (line[-1].isalnum() or line[-1] == "_"):
        line.pop()
