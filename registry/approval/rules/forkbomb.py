"""Fork bombs and runaway process loops: structures that span several commands.

Contract: :func:`is_fork_bomb_text` and :func:`is_background_loop_text` work on
a script's word/operator text (see :attr:`registry.approval.shell.syntax.Script.tokens`,
joined with spaces; quoted words holding shell syntax are masked as ``_``), and
:func:`is_fork_bomb_code` on interpreter source. All regexes are anchored at
word starts so their cost stays linear in the text length.
"""

from __future__ import annotations

import re

__all__ = ["FORK_BOMB", "is_background_loop_text", "is_fork_bomb_code", "is_fork_bomb_text"]

FORK_BOMB = ("fork_bomb", "fork bomb")
_NAME = r"[^\s;&|(){}<>]+"
_START = r"(?<![^\s;&|(){}<>])"
# name(){ name|name& }, "function name { ... }", and the "name& name" body variant.
_BODY = r"\s*[{(]\s*(?:(?P=f)\s*\|&?\s*(?P=f)\s*&|(?P=f)\s*&\s*;?\s*(?P=f)(?![^\s;&|(){}<>]))"
_FORK_BOMB_RES = (
    re.compile(rf"{_START}(?P<f>{_NAME})\s*\(\s*\){_BODY}"),
    re.compile(rf"{_START}function\s+(?P<f>{_NAME})\s*(?:\(\s*\))?{_BODY}"),
)
_CODE_FORK_BOMB_RE = re.compile(
    r"fork\s*(?:\(\s*\))?\s*while\s*fork"
    r"|while\s*(?:\(?\s*(?:1|true|True)\s*\)?)\s*[:{]?\s*(?:os\.|posix\.|Process\.)?fork\s*[(;]"
    r"|\bloop\s*\{\s*fork\b|for\s*\(\s*;\s*;\s*\)\s*\{?\s*fork\s*\("
)
# An endless loop whose body starts a background job and never waits for it.
_LOOP_RE = re.compile(
    r"(?:\bwhile\s+(?:true|:|1|\[\s+1\s+\])\s*;|\buntil\s+false\s*;"
    r"|\bfor\s*\(\s*\(\s*;\s*;\s*\)\s*\)\s*;?)"
    r"\s*do\b(?P<body>[^\n]{0,2000}?)\bdone\b"
)


def is_fork_bomb_text(code: str) -> bool:
    """True if ``code`` (a script's word/operator text) defines a fork bomb."""
    return ("(" in code or "function" in code) and any(r.search(code) for r in _FORK_BOMB_RES)


def is_fork_bomb_code(code: str) -> bool:
    """True for interpreter fork loops (``perl -e 'fork while fork'``)."""
    return "fork" in code and bool(_CODE_FORK_BOMB_RE.search(code))


def is_background_loop_text(code: str) -> bool:
    """True for ``while true; do X & done``: a job started per iteration, never waited for."""
    if "do" not in code or "&" not in code:
        return False
    for m in _LOOP_RE.finditer(code):
        body = m.group("body")
        if re.search(r"(?<![&|>])&(?![&>])", body) and not re.search(r"\bwait\b", body):
            return True
    return False
