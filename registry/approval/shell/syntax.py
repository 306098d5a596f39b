"""Syntax tree of the detection shell parser: words, redirections, commands.

Contract: plain data produced by :mod:`.lexer` and :func:`.parse.parse_script`;
see each class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Redirect", "Script", "SimpleCommand", "Word"]


@dataclass(slots=True)
class Word:
    """One shell word after quote removal.

    ``text`` keeps parameter expansions literally (``$HOME``) and keeps the source
    text of substitutions (``$(pwd)``); ``subs`` holds the inner scripts of every
    command/process substitution in the word; ``quoted`` tells whether any part
    was quoted or escaped; ``raw`` is the source slice. ``bare_dollar`` /
    ``quoted_dollar`` tell whether the word holds a parameter expansion or a
    substitution outside / inside double quotes (bash splits the result of the
    former); a ``$`` from single quotes or an escape sets neither.
    """

    text: str
    raw: str
    quoted: bool = False
    subs: list[str] = field(default_factory=list)
    bare_dollar: bool = False
    quoted_dollar: bool = False
    # Set by expansion: 0 all known, 1 a substitution's output is unknown,
    # 2 a variable's value is unknown (see registry.approval.shell.resolve).
    unknown: int = 0

    @property
    def expands(self) -> bool:
        """True when bash would expand something in this word."""
        return self.bare_dollar or self.quoted_dollar


@dataclass(slots=True)
class Redirect:
    """A redirection: ``op`` such as ``>``, ``>>``, ``<<``; ``fd`` the explicit fd.

    ``body`` is the here-document body for ``<<``/``<<-`` (or the here-string
    word for ``<<<``); ``subs`` the substitutions found in an unquoted body.
    """

    op: str
    target: Word
    fd: str | None = None
    body: str | None = None
    subs: list[str] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        """True when the redirection opens ``target`` for writing."""
        if self.op in (">", ">>", ">|", "&>", "&>>", "<>"):
            return True
        # ">&word" duplicates an fd when word is a number or "-", else it is a file.
        return self.op == ">&" and not (self.target.text.isdigit() or self.target.text == "-")

    @property
    def truncates(self) -> bool:
        """True when the write truncates the target (overwrite, not append)."""
        return self.writes and self.op not in (">>", "&>>", "<>")


@dataclass(slots=True)
class SimpleCommand:
    """Leading assignments, words and redirections of one simple command."""

    assigns: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass(slots=True)
class Script:
    """A parsed script: pipelines of simple commands plus a flat token view.

    A pipeline's commands are split by ``|``; ``&&``, ``||``, ``;``, ``&``,
    newlines and parentheses end a pipeline.

    ``tokens`` is the script as a sequence of word texts and operator strings,
    used by structural matchers that look across commands (fork bombs).
    """

    pipelines: list[list[SimpleCommand]]
    tokens: list[tuple[bool, str]]  # (is_operator, text)
    balanced: bool
    truncated: bool = False  # the lexer stopped at its item limit
    heredoc_open: bool = False  # a here-document is still waiting for its delimiter
    items: int = 0  # lexer items produced (the analysis budget counts them)
