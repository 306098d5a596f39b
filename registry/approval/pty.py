"""Input typed into a pty, reassembled into the lines its shell will run.

Contract: one :class:`PtyLineBuffer` per pty process. Writes arrive in any
pieces (``r``, then ``m -rf DIR\\n``); :meth:`PtyLineBuffer.feed` applies them
the way a line editor (readline, the kernel's canonical mode) would and
returns a :class:`PtyLine` for every Enter: backspace/DEL, Ctrl-U, Ctrl-K,
Ctrl-W, Ctrl-Y (yank), Ctrl-T, Ctrl-A/E/B/F and the arrow, Home/End and
Delete keys, Alt-b/f/d/Backspace, Ctrl-C (discard), Ctrl-V (literal next),
CR/LF/CRLF, bracketed paste. A line continues (backslash-newline, open
quotes, ``|``/``&&`` at the end, ``if``/``for``/``{`` without their closer,
an unfinished here-document) until the command is complete: each Enter
returns the whole command typed so far, so a command split across lines is
judged as one. Editing that cannot be modelled (tab completion, history
recall, reverse search, ``!`` history expansion, an editor round trip) marks
the line ``opaque``: its text is not what will run. A command that reconfigures
the line editor (``bind``, ``stty``, ``set -o vi``...) is opaque, and so is every
write after it, Enter or not: what keys do is then unknown (a ``bind`` macro runs
a command on one key).

Every Enter is also read the way a program without a line editor receives it
(:mod:`~registry.approval.pty_cooked`: ``sh`` where that is dash, ``read``):
:meth:`PtyLineBuffer.peek_both` returns that line too where it reads otherwise.

:meth:`PtyLineBuffer.peek` answers the same without changing the state, so a
write that is refused leaves the buffer as the terminal still is. Input past
``max_pending`` characters is returned as it is (its check refuses it as too
long) and the buffer starts over. Never raises.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from registry.approval.limits import DEFAULT_MAX_COMMAND_BYTES
from registry.approval.pty_cooked import CookedLineBuffer
from registry.approval.pty_cwd import PtyCwd
from registry.approval.shell.parse import parse_script

__all__ = ["PtyLine", "PtyLineBuffer"]

_OPENERS = {"if": "fi", "case": "esac", "do": "done", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}
_CONTINUATION_OPS = ("|", "&&", "||", "|&")
_HISTORY_EXPANSION_RE = re.compile(r"!(?=[!$\-0-9A-Za-z?#^*:])")
# Escape sequences (after ESC) with a meaning the editor model follows.
_CSI_MOVES = {"C": "right", "D": "left", "H": "home", "F": "end", "1~": "home", "7~": "home",
              "4~": "end", "8~": "end", "3~": "delete", "200~": "paste_on",
              "201~": "paste_off"}  # fmt: skip
_CSI_OPAQUE = frozenset({"A", "B", "5~", "6~"})  # history up/down, page up/down
_ALT_KEYS = {"b": "word_left", "f": "word_right", "d": "kill_word_right", "\x7f": "kill_word_left",
             "\x08": "kill_word_left", "B": "word_left", "F": "word_right"}  # fmt: skip
_OPAQUE_CONTROLS = frozenset("\t\x10\x0e\x12\x13\x0f\x18\x1d\x1f")
# Programs that change what keys do; the words that may come before a command's name.
_REBINDERS = frozenset({"bind", "bindkey", "stty", "zle"})
_PREFIXES = frozenset({"builtin", "command", "time", "!", "if", "then", "else", "elif",
                       "do", "while", "until", "{", "sudo"})  # fmt: skip
_ASSIGNMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class PtyLine:
    """A command the shell will see on Enter: ``text``; ``complete`` when the shell runs it now.

    ``opaque`` names the editing that could not be modelled (the text is then
    a best guess and must not be trusted), else None.
    """

    text: str
    complete: bool
    opaque: str | None = None


@dataclass
class _State:
    line: list[str] = field(default_factory=list)
    cursor: int = 0
    kill: str = ""
    logical: list[str] = field(default_factory=list)
    opaque: str | None = None
    escape: str | None = None  # pending escape sequence after ESC
    literal_next: bool = False
    paste: bool = False
    last_cr: bool = False
    rebound: str | None = None  # the line editor was reconfigured: every line is opaque


class PtyLineBuffer:
    """Line-editor model of one pty's input (module docstring)."""

    def __init__(
        self, max_pending: int = DEFAULT_MAX_COMMAND_BYTES, cwd: str | None = None
    ) -> None:
        """``cwd``: where the pty's shell starts, when known."""
        self.max_pending = max_pending
        self._state = _State()
        self._cooked = CookedLineBuffer(_complete, max_pending)
        self.cwd = PtyCwd(cwd)
        """Where the shell is, as the lines fed tell (:mod:`~registry.approval.pty_cwd`)."""

    @property
    def pending(self) -> str:
        """The command typed so far and not yet complete."""
        return "\n".join([*self._state.logical, "".join(self._state.line)])

    def reset(self) -> None:
        """Forget everything typed (the process was restarted)."""
        self._state = _State()
        self._cooked.reset()
        self.cwd = PtyCwd()

    def peek(self, data: str) -> list[PtyLine]:
        """The lines writing ``data`` would submit, leaving the buffer unchanged."""
        return self._apply(copy.deepcopy(self._state), data)

    @property
    def rebound(self) -> str | None:
        """Why keys are no longer modelled (a command reconfigured the line editor), else None."""
        return self._state.rebound

    def peek_both(self, data: str) -> list[PtyLine]:
        """:meth:`peek`, then the lines a program without a line editor would receive
        where they read otherwise; the buffer is unchanged. What is judged. Once
        :attr:`rebound`, any key may run a command (a macro): the write itself is
        returned as one opaque line."""
        if self._state.rebound is not None:
            return [PtyLine(data, True, self._state.rebound)] if data else []
        return _merged(self.peek(data), self._cooked.peek(data))

    def feed(self, data: str) -> list[PtyLine]:
        """Apply ``data`` (it was written to the pty) and return the lines it submitted."""
        self._cooked.feed(data)
        lines = self._apply(self._state, data)
        self.cwd.advance(lines)
        return lines

    # -- editing ------------------------------------------------------------------
    def _apply(self, st: _State, data: str) -> list[PtyLine]:
        out: list[PtyLine] = []
        for ch in data:
            if st.literal_next:
                st.literal_next = False
                self._insert(st, ch)
            elif st.escape is not None:
                self._escape(st, ch)
            elif ch in "\r\n":
                if ch == "\n" and st.last_cr:
                    st.last_cr = False
                    continue
                st.last_cr = ch == "\r"
                out.append(self._enter(st))
                continue
            else:
                self._key(st, ch)
            st.last_cr = False
            if len(st.line) + sum(len(x) + 1 for x in st.logical) > self.max_pending:
                out.append(PtyLine(self._text(st), True, st.opaque))
                self._clear(st)
        return out

    def _key(self, st: _State, ch: str) -> None:
        line = st.line
        if ch == "\x1b":
            st.escape = ""
        elif ch in ("\x7f", "\x08"):
            if st.cursor > 0:
                del line[st.cursor - 1]
                st.cursor -= 1
        elif ch == "\x15":  # Ctrl-U
            st.kill = "".join(line[: st.cursor])
            del line[: st.cursor]
            st.cursor = 0
        elif ch == "\x0b":  # Ctrl-K
            st.kill = "".join(line[st.cursor :])
            del line[st.cursor :]
        elif ch == "\x17":  # Ctrl-W
            self._kill_word_left(st, whitespace=True)
        elif ch == "\x19":  # Ctrl-Y
            for c in st.kill:
                self._insert(st, c)
        elif ch == "\x14":  # Ctrl-T
            if st.cursor > 0 and len(line) >= 2:
                i = min(st.cursor, len(line) - 1)
                line[i - 1], line[i] = line[i], line[i - 1]
                st.cursor = min(len(line), i + 1)
        elif ch in ("\x01", "\x05", "\x02", "\x06", "\x04"):
            self._move(st, {"\x01": "home", "\x05": "end", "\x02": "left", "\x06": "right",
                            "\x04": "delete"}[ch])  # fmt: skip
        elif ch == "\x03":  # Ctrl-C
            self._clear(st)
        elif ch == "\x16":  # Ctrl-V
            st.literal_next = True
        elif ch in _OPAQUE_CONTROLS:
            st.opaque = st.opaque or f"unmodelled editing key {ch!r}"
            if ch == "\t":
                self._insert(st, ch)
        elif ch in ("\x0c", "\x07"):
            pass  # clear screen, bell
        else:
            self._insert(st, ch)

    def _insert(self, st: _State, ch: str) -> None:
        st.line.insert(st.cursor, ch)
        st.cursor += 1

    def _move(self, st: _State, action: str) -> None:
        line = st.line
        if action == "home":
            st.cursor = 0
        elif action == "end":
            st.cursor = len(line)
        elif action == "left":
            st.cursor = max(0, st.cursor - 1)
        elif action == "right":
            st.cursor = min(len(line), st.cursor + 1)
        elif action == "delete":
            if st.cursor < len(line):
                del line[st.cursor]
        elif action == "word_left":
            st.cursor = self._word_start(st)
        elif action == "word_right":
            i = st.cursor
            while i < len(line) and not line[i].isalnum():
                i += 1
            while i < len(line) and line[i].isalnum():
                i += 1
            st.cursor = i
        elif action == "kill_word_right":
            end = st.cursor
            self._move(st, "word_right")
            st.kill = "".join(line[end : st.cursor])
            del line[end : st.cursor]
            st.cursor = end
        elif action == "kill_word_left":
            self._kill_word_left(st, whitespace=False)
        elif action == "paste_on":
            st.paste = True
        elif action == "paste_off":
            st.paste = False

    def _word_start(self, st: _State, whitespace: bool = False) -> int:
        i = st.cursor
        sep = (lambda c: c.isspace()) if whitespace else (lambda c: not c.isalnum())
        while i > 0 and sep(st.line[i - 1]):
            i -= 1
        while i > 0 and not sep(st.line[i - 1]):
            i -= 1
        return i

    def _kill_word_left(self, st: _State, whitespace: bool) -> None:
        start = self._word_start(st, whitespace)
        st.kill = "".join(st.line[start : st.cursor])
        del st.line[start : st.cursor]
        st.cursor = start

    def _escape(self, st: _State, ch: str) -> None:
        seq = st.escape + ch if st.escape is not None else ch
        if seq in ("[", "O") or (seq[:1] in "[O" and not (ch.isalpha() or ch == "~")):
            st.escape = seq if len(seq) < 16 else None
            return
        st.escape = None
        body = seq[1:] if seq[:1] in "[O" else None
        if body is not None:
            if body in _CSI_MOVES:
                self._move(st, _CSI_MOVES[body])
            elif body in _CSI_OPAQUE:
                st.opaque = st.opaque or "history recall"
            elif ";" in body and body[-1] in "CD":
                self._move(st, "word_right" if body[-1] == "C" else "word_left")
            else:
                st.opaque = st.opaque or f"unmodelled escape sequence {seq!r}"
            return
        if seq in _ALT_KEYS:
            self._move(st, _ALT_KEYS[seq])
        else:
            st.opaque = st.opaque or f"unmodelled Alt key {seq!r}"

    # -- lines --------------------------------------------------------------------
    def _text(self, st: _State) -> str:
        return "\n".join([*st.logical, "".join(st.line)])

    def _clear(self, st: _State) -> None:
        st.line, st.cursor, st.logical, st.opaque = [], 0, [], None

    def _enter(self, st: _State) -> PtyLine:
        physical = "".join(st.line)
        text = self._text(st)
        opaque = st.opaque or st.rebound
        if _HISTORY_EXPANSION_RE.search(_outside_single_quotes(physical)):
            opaque = opaque or "history expansion (!)"
        complete = not st.paste and _complete(text)
        rebinder = _rebinds(text) if complete else None
        if rebinder is not None:
            opaque = opaque or f"{rebinder} reconfigures the line editor"
            st.rebound = f"the line editor was reconfigured ({rebinder})"
        if complete:
            self._clear(st)
        else:
            st.logical.append(physical)
            st.line, st.cursor = [], 0
            st.opaque = opaque
        return PtyLine(text, complete, opaque)


def _merged(edited: list[PtyLine], cooked: list[tuple[str, bool]]) -> list[PtyLine]:
    """The line editor's lines, then the canonical-mode lines that read otherwise."""
    seen = {line.text for line in edited}
    return [*edited, *(PtyLine(text, done) for text, done in cooked if text not in seen)]


def _rebinds(text: str) -> str | None:
    """The name of the command in ``text`` that reconfigures the line editor, else None."""
    simple: list[str] = []
    for is_op, tok in [*parse_script(text, max_items=20_000).tokens, (True, ";")]:
        if not is_op:
            simple.append(tok)
            continue
        words = [w for w in simple if not _ASSIGNMENT_RE.match(w)]
        while words and words[0] in _PREFIXES:
            words = words[1:]
        name = words[0] if words else ""
        if name in _REBINDERS:
            return name
        if name == "set" and any(w.lstrip("-+o") in ("vi", "emacs") for w in words[1:]):
            return "set -o " + next(w for w in words[1:] if w.lstrip("-+o") in ("vi", "emacs"))
        simple = []
    return None


def _outside_single_quotes(text: str) -> str:
    return re.sub(r"'[^']*'", "''", text)


def _complete(text: str) -> bool:
    """Would an interactive shell run ``text`` now (rather than ask for more)?"""
    stripped = text.rstrip(" \t")
    if stripped.endswith("\\") and not stripped.endswith("\\\\"):
        return False
    if stripped.endswith(_CONTINUATION_OPS):
        return False
    parsed = parse_script(text, max_items=20_000)
    if not parsed.balanced or parsed.heredoc_open:
        return False
    depth = 0
    command_start = True
    for is_op, tok in parsed.tokens:
        if is_op:
            depth += {"(": 1, ")": -1}.get(tok, 0)
            command_start = tok in (";", "\n", "&", "&&", "||", "|", "(", ")", ";;")
            continue
        if command_start and tok in _OPENERS:
            depth += 1
        elif command_start and tok in _CLOSERS:
            depth -= 1
        command_start = tok in ("then", "do", "else", "elif", "{", "!", "time")
    return depth <= 0
