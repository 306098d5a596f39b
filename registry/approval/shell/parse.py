"""Shell parser for detection: pipelines of simple commands, never raising.

Contract: :func:`parse_script` accepts any string and never raises. It splits a
POSIX/bash-like script into pipelines of simple commands, removes quoting the
way bash does (``r''m`` -> ``rm``, ``\\r\\m`` -> ``rm``, ``$'\\x72m'`` -> ``rm``)
and records, for every word, the inner text of command and process
substitutions it contains (``$(...)``, backticks, ``<(...)``, ``>(...)``),
including substitutions inside double quotes, ``${...}`` and unquoted
here-documents, because bash executes those.

Unbalanced quotes or substitutions do not raise: the rest of the input is
taken as the quoted text and :attr:`Script.balanced` is ``False`` so callers
can add a flat-text fallback. ``max_items`` bounds the work (see
:class:`~registry.approval.shell.lexer.Lexer`).

This is not a shell: no expansion beyond quote removal happens here
(:mod:`registry.approval.shell.expand` does the rest).
"""

from __future__ import annotations

import re

from registry.approval.shell.lexer import Lexer
from registry.approval.shell.syntax import Redirect, Script, SimpleCommand, Word

__all__ = ["Redirect", "Script", "SimpleCommand", "Word", "parse_script"]

_HAS_META_RE = re.compile(r"[\s;&|()<>{}]")
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


def parse_script(src: str, max_items: int | None = None) -> Script:
    """Parse ``src`` into pipelines of simple commands (see module docstring)."""
    lex = Lexer(src, max_items)
    lex.run()
    pipelines: list[list[SimpleCommand]] = []
    tokens: list[tuple[bool, str]] = []
    current: list[SimpleCommand] = []
    cmd = SimpleCommand()

    def flush_cmd() -> None:
        nonlocal cmd
        if cmd.words or cmd.assigns or cmd.redirects:
            current.append(cmd)
        cmd = SimpleCommand()

    def flush_pipeline() -> None:
        nonlocal current
        flush_cmd()
        if current:
            pipelines.append(current)
        current = []

    for kind, item in lex.items:
        if kind == "word":
            assert isinstance(item, Word)
            # A quoted word holding shell syntax is one argument (data), not code:
            # mask it so token-level matchers do not see "echo ':(){ :|:& };:'".
            masked = item.quoted and _HAS_META_RE.search(item.text) is not None
            tokens.append((False, "_" if masked else item.text))
            if not cmd.words and _ASSIGNMENT_RE.match(item.raw):
                cmd.assigns.append(item)
            else:
                cmd.words.append(item)
        elif kind == "redir":
            assert isinstance(item, Redirect)
            tokens.append((True, item.op))
            tokens.append((False, item.target.text))
            cmd.redirects.append(item)
        else:
            assert isinstance(item, str)
            tokens.append((True, item))
            if item in ("|", "|&"):
                flush_cmd()
            else:
                flush_pipeline()
    flush_pipeline()
    return Script(pipelines, tokens, lex.balanced, lex.truncated, lex.heredoc_open, len(lex.items))
