"""What every rule family shares: the placeholder, read bounds, the rule shape, detector helpers.

A *rule* is a pair: a **detector**, one compiled regex that starts with a
literal (``-``, ``_``, ``.``, ``:``, ``=``, ``//``, ``-----BEGIN``, ``Bearer``,
``sbx``...) and finds *candidates* -- a superset of where a secret may be --
and a **verifier**, which applies the exact rules at one candidate and returns
the span to replace (or ``None``).

Cost model (CPython ``re``): a pattern that starts with a literal is found with
a tight C loop; each position that loop stops at costs a match call (~40 ns).
So every detector starts with a literal, the first checks after it are
fixed-width look-arounds, cheapest first, and a detector's matches never
overlap one another -- so the set it finds does not depend on where a search
starts, which is what lets streaming give the same answer as one pass.

Linear time: every quantifier is bounded and, where a run is consumed,
possessive; verifiers read bounded windows (:data:`MAX_READ_AHEAD` after the
anchor, :data:`MAX_READ_BEHIND` before it), and a verifier that rejects after
reading far only reads runs that few other candidates read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

PLACEHOLDER: Final = "[REDACTED]"
#: Appended after a kept, non-secret vendor prefix: ``sk-proj-...[REDACTED]``.
MARKED: Final = "..." + PLACEHOLDER

#: Longest secret value/body redacted in one piece (chars).  Longer runs are
#: pathological; their first MAX_SECRET chars are redacted.
MAX_SECRET: Final = 8192
#: Furthest any verifier reads past its anchor (JWT: 1024 + 8192 + 1024 + dots;
#: a split vendor token: 8192 body + its separators).
MAX_READ_AHEAD: Final = 10_400
#: Furthest any detector or verifier reads *before* its anchor (the command of a
#: ``-p PW`` flag, the ``machine`` of a ``.netrc`` password).
MAX_READ_BEHIND: Final = 1100

#: Characters of a token run (for boundaries), as the inside of a class.
TOK: Final = "A-Za-z0-9_-"

Hit = tuple[int, int, str]  # (start, end, replacement) of the text to replace
Verify = Callable[[str, int], Hit | None]
#: ``unsettled(text, p, end)``: whether the candidate at ``p`` could be decided
#: differently once text arrives after ``end`` (a line break).
Unsettled = Callable[[str, int, int], bool]


@dataclass(frozen=True)
class Rule:
    """One detector and the verifier of its candidates.

    Contract of ``verify(text, p)``: ``p`` is the start of a detector match;
    the returned span starts at or after ``p`` (the stream relies on it) and
    reads no more than :data:`MAX_READ_BEHIND` before ``p`` nor
    :data:`MAX_READ_AHEAD` after it.  Only secrets that may continue across a
    line break (split tokens) need ``unsettled``.
    """

    name: str
    detector: re.Pattern[str]
    verify: Verify
    unsettled: Unsettled | None = None


def rule(name: str, detector: str, verify: Verify, unsettled: Unsettled | None = None) -> Rule:
    return Rule(name, re.compile(detector), verify, unsettled)


# ------------------------------------------------------------ detector helpers


def ci(word: str) -> str:
    """Case-insensitive literal as character classes (cheaper in ``re`` than (?i))."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def char_class(chars: set[str], fold: bool) -> str:
    both = {x for c in chars for x in ((c.lower(), c.upper()) if fold else (c,))}
    return "[" + "".join(re.escape(c) for c in sorted(both)) + "]"


def gate(words: list[str], fold: bool, suffix: str = "", width: int = 2) -> str:
    """Look-behind: the last ``width`` characters before ``suffix`` could end a word."""
    classes = "".join(char_class({w[-i] for w in words}, fold) for i in range(width, 0, -1))
    return f"(?<={classes}{suffix})"


def by_length(words: list[str], fold: bool, suffix: str = "", boundary: bool = False) -> str:
    """Exact look-behinds, one per word length (``re`` needs fixed width).

    With ``boundary`` the word must also start a token run, so "sk-sk-sk-..."
    yields one candidate, not one per repetition."""
    render = ci if fold else re.escape
    groups: dict[int, list[str]] = {}
    for w in words:
        groups.setdefault(len(w), []).append(w)
    return "|".join(
        "(?<=(?:" + "|".join(render(w) for w in ws) + ")" + suffix + ")"
        + (f"(?<![{TOK}][\\s\\S]{{{n}}})" if boundary else "")
        for n, ws in sorted(groups.items())
    )
