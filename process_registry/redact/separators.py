"""Secrets split on purpose: a known prefix, then the rest behind invisible characters.

``ghp_abc`` + ``\\u200b`` + ``def...``, ``sk-abc`` + ``\\x1b[0m`` + ``def...``,
``ghp_abc`` + newline + ``def...`` print as one token (or one wrapped token)
and are one secret.  A token of a known prefix is read as up to
:data:`MAX_JOINS` + 1 runs joined by

* *invisible* separators -- ANSI escape sequences, control characters other
  than tab and line breaks, zero-width and other format characters, and bytes
  that are not UTF-8 (``\\ufffd`` or a surrogate escape once decoded) -- always:
  nothing visible, or nothing a token could hold, separates the runs;
* one line break (with invisible characters around it) only while the token
  is still incomplete (shorter than its vendor's minimum): a complete token at
  the end of a line never swallows the next line.

Linear time: a candidate reads at most ``MAX_JOINS + 1`` runs, and every
candidate starts a token run, so each run is read by at most a few candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from .base import MAX_SECRET

#: Runs joined into one token at most (plus the first).
MAX_JOINS: Final = 4

_INVISIBLE_CLASS: Final = (
    "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1a\\x1c-\\x1f\\x7f-\\x9f\\u00ad\\u034f\\u061c\\u115f\\u1160"
    "\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u206f\\u3164"
    "\\ufe00-\\ufe0f\\ufeff\\uffa0"
    # An invalid byte, decoded with "replace" or "surrogateescape": nothing a token holds.
    "\\ufffd\\udc80-\\udcff"
)
#: One invisible unit: an ANSI escape (CSI, OSC, two-byte) or one invisible character.
INVISIBLE: Final = (
    r"(?:\x1b(?:\[[0-?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b\r\n]{0,256}(?:\x07|\x1b\\)|[@-Z\\-_])?"
    f"|[{_INVISIBLE_CLASS}])"
)
# The line-break form first: invisible characters before a line break belong to it.
_SEP: Final = re.compile(
    f"(?:{INVISIBLE}){{0,16}}+(?P<nl>\\r\\n|\\n|\\r)(?:{INVISIBLE}){{0,16}}+|(?:{INVISIBLE}){{1,16}}+"
)
#: A character that may start a separator (for detectors' cheap look-aheads).
SEP_START: Final = f"[\\r\\n\\x1b{_INVISIBLE_CLASS}]"
_REST: Final = re.compile(f"(?:{INVISIBLE}){{0,16}}+\\r?")
#: Characters of any token body: the runs that are joined.
_RUN: Final = re.compile(r"[A-Za-z0-9_+/=.~-]{0,8192}+")
_NL: Final = re.compile(r"[\r\n]")

Segments = list[tuple[int, int]]
#: ``match(text, start, endpos)``: end of a valid token whose prefix starts at ``start``, or None.
TokenMatch = Callable[[str, int, int], int | None]


def _run_end(text: str, pos: int, stop: int) -> int:
    m = _RUN.match(text, pos, stop)
    return pos if m is None else m.end()


def continues(text: str, end: int, endpos: int | None = None) -> bool:
    """Whether invisible characters at ``end`` are followed by more of a token."""
    stop = len(text) if endpos is None else endpos
    m = _SEP.match(text, end, stop)
    return m is not None and m.group("nl") is None and _run_end(text, m.end(), stop) > m.end()


def joined_runs(text: str, start: int, newline: bool, endpos: int | None = None) -> Segments:
    """The runs of a token body from ``start``, as (start, end) segments of ``text``.

    Separators between segments are invisible ones, and at most one line
    break when ``newline``.  Only ``text[:endpos]`` is read.
    """
    stop = len(text) if endpos is None else endpos
    segments: Segments = []
    pos, total = start, 0
    for _ in range(MAX_JOINS + 1):
        end = _run_end(text, pos, stop)
        if end == pos and segments:  # a separator not followed by more token
            break
        segments.append((pos, end))
        total += end - pos
        sep = _SEP.match(text, end, stop)
        if total >= MAX_SECRET or sep is None or (sep.group("nl") and not newline):
            break
        newline = newline and not sep.group("nl")
        pos = sep.end()
    return segments


def joined_text(text: str, segments: Segments) -> str:
    return "".join(text[a:b] for a, b in segments)


def original_end(segments: Segments, length: int) -> int:
    """Position in the original text just after the first ``length`` joined characters."""
    for a, b in segments:
        if length <= b - a:
            return a + length
        length -= b - a
    return segments[-1][1]


def line_breaks(text: str, start: int, end: int) -> str:
    """The line breaks inside ``text[start:end]``, kept after a joined token's placeholder."""
    return "".join(_NL.findall(text, start, end))


def reaches(text: str, segments: Segments, end: int) -> bool:
    """Whether nothing but invisible characters (and a ``\\r``) lie between the runs and ``end``."""
    rest = _REST.match(text, segments[-1][1], end)
    return rest is not None and rest.end() == end


def token_end(text: str, start: int, body: int, match: TokenMatch) -> int | None:
    """End of the token whose prefix is ``text[start:body]``, joined across separators.

    A token that is complete as it stands joins only invisible separators; an
    incomplete one may also join one line break.
    """
    end = match(text, start, len(text))
    if end is not None and not continues(text, end):
        return end
    segments = joined_runs(text, body, newline=end is None)
    if len(segments) < 2:
        return end
    head = body - start
    joined = text[start:body] + joined_text(text, segments)
    full = match(joined, 0, len(joined))
    if full is None or full - head <= segments[0][1] - segments[0][0]:
        return end
    return original_end(segments, full - head)


def token_unsettled(text: str, start: int, body: int, match: TokenMatch, end: int) -> bool:
    """Whether the token at ``start`` could join text after the line break at ``end``."""
    if match(text, start, end) is not None:
        return False  # complete: it never joins a line break
    segments = joined_runs(text, body, newline=True, endpos=end)
    if len(segments) > MAX_JOINS or line_breaks(text, segments[0][0], segments[-1][1]):
        return False
    return reaches(text, segments, end)
