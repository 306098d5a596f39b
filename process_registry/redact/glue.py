"""Glue: what may join a vendor prefix to the run before it.

A vendor prefix counts where a token run starts (``sk-`` is not one in
``task-``).  It also counts right after *glue*: an identifier joiner (``_``,
``-``) or an escape that stands for a separator -- ``\\n``, ``\\r``, ``\\t``
(JSON- or C-escaped text), ``%3D`` (URL-encoded), ``\\u003d`` (JSON unicode) --
so ``tool_ghp_...``, ``my_sk-proj-...``, ``"log":"...\\nghp_..."`` and
``token%3Dghp_...`` are tokens.  Only prefixes of :data:`GLUED_MIN` characters or
more are taken glued (``ghp_``, ``AKIA``, ``sk-proj-``; not ``sk-`` or ``hf_``,
which end ordinary words too).  A glued token is read whole or not at all, up to
:data:`GLUED_MAX` characters and never joined across separators: every glued
candidate reads a bounded window, so the scan stays linear however many
candidates a run holds.  Glue after letters or digits (``prefixghp_...``) is
not recognised.
"""

from __future__ import annotations

import re
from typing import Final

from .base import MARKED, PLACEHOLDER
from .separators import TokenMatch

#: Shortest prefix taken glued.
GLUED_MIN: Final = 4
#: Longest glued token body read; a longer run is not taken for a glued token.
GLUED_MAX: Final = 320
_GLUES: Final = (r"[_-]", r"\\[nrt]", r"%[0-9A-Fa-f]{2}", r"\\u[0-9A-Fa-f]{4}")
_ESCAPE: Final = re.compile("|".join(_GLUES[1:]))
_ESCAPE_WIDTHS: Final = (2, 3, 6)
_PLACEHOLDERS: Final = (MARKED, PLACEHOLDER)
_ALNUM: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_RUN_CHARS: Final = _ALNUM | {"_", "-"}


def glue_behind(n: int) -> str:
    """A regex look-behind, at ``n`` characters past a prefix's start: glue before it."""
    return "(?:" + "|".join(f"(?<={g}[\\s\\S]{{{n}}})" for g in _GLUES) + ")"


def starts_run(text: str, start: int) -> bool:
    """Whether a token run starts at ``start`` (nothing of one just before it)."""
    return start == 0 or text[start - 1] not in _RUN_CHARS


def glued(text: str, start: int) -> bool:
    """Whether the prefix at ``start`` follows glue."""
    if start == 0:
        return False
    return text[start - 1] in "_-" or any(
        _ESCAPE.fullmatch(text, start - w, start) for w in _ESCAPE_WIDTHS if start >= w
    )


def glued_end(text: str, start: int, body: int, match: TokenMatch) -> int | None:
    """End of the glued token whose prefix is ``text[start:body]`` (``match`` reads it
    without a left boundary), or None when there is none, when letters or digits follow
    it (a longer run than the vendor's token), when it runs on past :data:`GLUED_MAX`, or
    when a placeholder follows it."""
    stop = min(len(text), body + GLUED_MAX)
    end = match(text, start, stop)
    if end is None or (end < len(text) and text[end] in _ALNUM):
        return None  # none, or letters and digits run on past what the vendor's body allows
    if end == stop < len(text) and text[stop] in _RUN_CHARS:
        return None
    # A token redacted after this one left its placeholder where its body was: taken now,
    # this one would have read through that body before (and been refused), so redacting
    # twice would differ from redacting once.
    if text.startswith(_PLACEHOLDERS, end):
        return None
    return end
