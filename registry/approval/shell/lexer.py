"""Single-pass, total shell lexer (quotes, substitutions, here-documents).

Contract: :class:`Lexer` turns any string into words (quote removal done,
substitution inner scripts recorded), operators and redirections without ever
raising; unbalanced input sets :attr:`Lexer.balanced` to False. With
``max_items`` it stops after that many items and sets :attr:`Lexer.truncated`
(the analysis budget). Work is linear in the input length.
:func:`find_substitutions` extracts ``$(...)``/backtick scripts from text that
bash expands without splitting (``${...}``, unquoted here-document bodies).
"""

from __future__ import annotations

import re

from registry.approval.shell.escapes import decode_ansi_c
from registry.approval.shell.syntax import Redirect, Word

__all__ = ["Lexer", "find_substitutions"]

# Longest first so that "&&" wins over "&" and ";;&" over ";;".
_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", "&", "|", ";", "\n", "(", ")")
_REDIRECTS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">|", "<>", ">&", "<&", ">", "<")
_META = frozenset(" \t\n;&|()<>")
_OP_START = frozenset(";&|()<>")
# A run of characters that need no special handling inside an unquoted word.
_PLAIN_RUN_RE = re.compile(r"[^\s;&|()<>\\'\"$`]+")
_FD_PREFIX_RE = re.compile(r"\d{1,3}(?=[<>])")
# "NAME=" or "NAME+=" right before "(": an array assignment, "a=(x y)".
# The characters each skip routine must look at; everything between is jumped over.
_DOUBLE_SPECIAL = re.compile(r'[\\"`]|\$\(')
_BACKTICK_SPECIAL = re.compile(r"[\\`]")
_PAREN_SPECIAL = re.compile(r"[\\'\"`()]")
_BRACE_SPECIAL = re.compile(r"[\\'\"{}]|\$\(")
_ARRAY_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=$")
# What may follow "$" for bash to expand it.
_EXPANDS_AFTER_DOLLAR = frozenset("{(_@*#?$!-0123456789") | frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


class Lexer:
    """Single-pass lexer producing words, operators and redirections."""

    def __init__(self, src: str, max_items: int | None = None) -> None:
        self.s = src
        self.n = len(src)
        self.i = 0
        self.balanced = True
        self.truncated = False
        self.heredoc_open = False
        self.max_items = max_items
        # Per word being read: did it hold an expansion outside / inside double quotes?
        self._bare = False
        self._in_dq = False
        self._quoted_dollar = False
        # Each item: ("word", Word) | ("op", str) | ("redir", Redirect)
        self.items: list[tuple[str, object]] = []
        self._pending_heredocs: list[tuple[Redirect, str, bool, bool]] = []

    # -- scanning helpers -------------------------------------------------
    def _skip_single(self, j: int) -> int:
        """Return the index after the closing ``'`` of a quote opened before j."""
        k = self.s.find("'", j)
        if k < 0:
            self.balanced = False
            return self.n
        return k + 1

    def _skip_double(self, j: int) -> int:
        """Return the index after the closing ``"``, honouring nested ``$(``."""
        s, n = self.s, self.n
        while True:
            m = _DOUBLE_SPECIAL.search(s, j)
            if m is None:
                break
            j = m.start()
            c = s[j]
            if c == "\\":
                j += 2
            elif c == '"':
                return j + 1
            elif c == "`":
                j = self._skip_backtick(j + 1)
            else:  # "$("
                j = self._skip_paren(j + 2)
        self.balanced = False
        return n

    def _skip_backtick(self, j: int) -> int:
        s, n = self.s, self.n
        while True:
            m = _BACKTICK_SPECIAL.search(s, j)
            if m is None:
                break
            j = m.start()
            if s[j] == "`":
                return j + 1
            j += 2
        self.balanced = False
        return n

    def _skip_paren(self, j: int) -> int:
        """Return the index after the ``)`` matching an already-consumed ``(``."""
        return self._skip_group(j, _PAREN_SPECIAL, "(", ")")

    def _skip_brace(self, j: int) -> int:
        """Return the index after the ``}`` matching an already-consumed ``{``."""
        return self._skip_group(j, _BRACE_SPECIAL, "{", "}")

    def _skip_group(self, j: int, special: re.Pattern[str], opener: str, closer: str) -> int:
        s, n = self.s, self.n
        depth = 1
        while True:
            m = special.search(s, j)
            if m is None:
                break
            j = m.start()
            c = s[j]
            if c == "\\":
                j += 2
            elif c == "'":
                j = self._skip_single(j + 1)
            elif c == '"':
                j = self._skip_double(j + 1)
            elif c == "`":
                j = self._skip_backtick(j + 1)
            elif c == opener:
                depth += 1
                j += 1
            elif c == closer:
                depth -= 1
                j += 1
                if depth == 0:
                    return j
            else:  # "$(" inside ${...}
                j = self._skip_paren(j + 2)
        self.balanced = False
        return n

    # -- word reading -----------------------------------------------------
    def _dollar(self, j: int, out: list[str], subs: list[str]) -> int:
        """Handle ``$`` at j (unquoted or in double quotes); return new index."""
        s = self.s
        if s[j + 1 : j + 2] in _EXPANDS_AFTER_DOLLAR:
            if self._in_dq:
                self._quoted_dollar = True
            else:
                self._bare = True
        if s.startswith("$(", j):
            end = self._skip_paren(j + 2)
            inner_end = end - 1 if end <= self.n and s[end - 1 : end] == ")" else end
            subs.append(s[j + 2 : inner_end])
            out.append(s[j:end])
            return end
        if s.startswith("${", j):
            end = self._skip_brace(j + 2)
            inner = s[j + 2 : max(j + 2, end - 1)]
            subs.extend(find_substitutions(inner))
            out.append(s[j:end])
            return end
        out.append("$")
        return j + 1

    def _backtick(self, j: int, out: list[str], subs: list[str]) -> int:
        if self._in_dq:
            self._quoted_dollar = True
        else:
            self._bare = True
        end = self._skip_backtick(j + 1)
        inner = self.s[j + 1 : end - 1 if self.s[end - 1 : end] == "`" else end]
        subs.append(inner.replace("\\`", "`").replace("\\\\", "\\").replace("\\$", "$"))
        out.append(self.s[j:end])
        return end

    def _ansi_c(self, j: int, out: list[str]) -> int:
        """Decode ``$'...'`` starting after the opening quote; return new index."""
        text, end, closed = decode_ansi_c(self.s, j)
        out.append(text)
        if not closed:
            self.balanced = False
        return end

    def read_word(self) -> Word:
        s, n = self.s, self.n
        start = self.i
        j = self.i
        out: list[str] = []
        subs: list[str] = []
        quoted = False
        self._bare = self._quoted_dollar = self._in_dq = False
        # Process substitution: <(...) or >(...) as a whole word.
        if s.startswith("<(", j) or s.startswith(">(", j):
            end = self._skip_paren(j + 2)
            subs.append(s[j + 2 : end - 1 if s[end - 1 : end] == ")" else end])
            out.append(s[j:end])
            j = end
        while j < n:
            m = _PLAIN_RUN_RE.match(s, j)
            if m:
                out.append(m.group(0))
                j = m.end()
                if j >= n:
                    break
            c = s[j]
            if c == "(" and _ARRAY_ASSIGN_RE.match(s[start:j]):
                end = self._skip_paren(j + 1)  # a=(x y): the list is part of the word
                out.append(s[j:end])
                j = end
                continue
            if c in _META:
                break
            if c == "\\":
                quoted = True
                if j + 1 < n:
                    if s[j + 1] != "\n":
                        out.append(s[j + 1])
                    j += 2
                else:
                    out.append("\\")
                    j += 1
            elif c == "'":
                quoted = True
                end = self._skip_single(j + 1)
                out.append(s[j + 1 : end - 1 if s[end - 1 : end] == "'" and end - 1 > j else end])
                j = end
            elif c == '"' or (c == "$" and s.startswith('$"', j)):
                quoted = True
                j = self._read_double(j + (2 if c == "$" else 1), out, subs)
            elif c == "$" and s.startswith("$'", j):
                quoted = True
                j = self._ansi_c(j + 2, out)
            elif c == "$":
                j = self._dollar(j, out, subs)
            elif c == "`":
                j = self._backtick(j, out, subs)
            else:
                out.append(c)
                j += 1
        self.i = j
        return Word("".join(out), s[start:j], quoted, subs, self._bare, self._quoted_dollar)

    def _read_double(self, j: int, out: list[str], subs: list[str]) -> int:
        self._in_dq = True
        try:
            return self._read_double_body(j, out, subs)
        finally:
            self._in_dq = False

    def _read_double_body(self, j: int, out: list[str], subs: list[str]) -> int:
        s, n = self.s, self.n
        while j < n:
            c = s[j]
            if c == '"':
                return j + 1
            if c == "\\" and j + 1 < n:
                e = s[j + 1]
                if e in '$`"\\':
                    out.append(e)
                elif e != "\n":
                    out.append(c + e)
                j += 2
            elif c == "$":
                j = self._dollar(j, out, subs)
            elif c == "`":
                j = self._backtick(j, out, subs)
            else:
                out.append(c)
                j += 1
        self.balanced = False
        return n

    # -- here-documents ---------------------------------------------------
    def _read_heredocs(self) -> None:
        """Consume here-document bodies that start after the newline at self.i."""
        s = self.s
        for redir, delim, strip_tabs, expand in self._pending_heredocs:
            lines: list[str] = []
            closed = False
            while self.i < self.n:
                nl = s.find("\n", self.i)
                line = s[self.i :] if nl < 0 else s[self.i : nl]
                self.i = self.n if nl < 0 else nl + 1
                check = line.lstrip("\t") if strip_tabs else line
                if check == delim:
                    closed = True
                    break
                lines.append(check)
            if not closed:
                self.heredoc_open = True
            redir.body = "\n".join(lines)
            if expand:
                redir.subs.extend(find_substitutions(redir.body))
        self._pending_heredocs.clear()

    # -- main loop --------------------------------------------------------
    def run(self) -> None:
        s, n = self.s, self.n
        limit = self.max_items
        while self.i < n:
            if limit is not None and len(self.items) >= limit:
                self.truncated = True
                return
            c = s[self.i]
            if c in " \t":
                self.i += 1
                continue
            if c == "#":
                # Words are consumed whole, so a "#" here starts a word: a comment.
                nl = s.find("\n", self.i)
                self.i = n if nl < 0 else nl
                continue
            if c == "\n":
                self.items.append(("op", "\n"))
                self.i += 1
                if self._pending_heredocs:
                    self._read_heredocs()
                continue
            if c not in _OP_START and not c.isdigit():
                # Fast path: the common case is a plain word.
                self.items.append(("word", self.read_word()))
                continue
            m = _FD_PREFIX_RE.match(s, self.i) if c.isdigit() else None
            j = m.end() if m else self.i
            if s[j : j + 1] in ("<", ">", "&") and not s.startswith(("<(", ">("), j):
                redir_op = next((op for op in _REDIRECTS if s.startswith(op, j)), None)
                if redir_op is not None:
                    self.i = j + len(redir_op)
                    self._redirect(redir_op, m.group(0) if m else None)
                    continue
            op = (
                next((o for o in _OPERATORS if s.startswith(o, self.i)), None)
                if c in _OP_START
                else None
            )
            if op is not None:
                self.items.append(("op", op))
                self.i += len(op)
                continue
            self.items.append(("word", self.read_word()))
        if self._pending_heredocs:
            self.heredoc_open = True  # "cat <<EOF" with nothing after it

    def _redirect(self, op: str, fd: str | None) -> None:
        while self.i < self.n and self.s[self.i] in " \t":
            self.i += 1
        if (self.i < self.n and self.s[self.i] not in _META) or self.s.startswith(
            ("<(", ">("), self.i
        ):
            target = self.read_word()
        else:
            target = Word("", "")
        redir = Redirect(op, target, fd)
        if op in ("<<", "<<-"):
            expand = not target.quoted
            self._pending_heredocs.append((redir, target.text, op == "<<-", expand))
        elif op == "<<<":
            redir.body = target.text
        self.items.append(("redir", redir))


def find_substitutions(text: str) -> list[str]:
    """Inner scripts of ``$(...)`` and backtick substitutions anywhere in ``text``.

    Used for text that bash expands but does not split into commands:
    ``${...}`` contents and unquoted here-document bodies.
    """
    if "$(" not in text and "`" not in text:
        return []
    lex = Lexer(text)
    subs: list[str] = []
    j = 0
    while j < lex.n:
        c = text[j]
        if c == "\\":
            j += 2
        elif c == "$":
            j = lex._dollar(j, [], subs)
        elif c == "`":
            j = lex._backtick(j, [], subs)
        else:
            j += 1
    return subs
