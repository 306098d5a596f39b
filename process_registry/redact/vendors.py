"""Every vendor-prefixed credential, found by its prefix: detectors, verifier, placeholders.

The tables live with their families (:mod:`.providers`, :mod:`.cloud`, the age
identities in :mod:`.private_keys`); this module indexes them by *anchor* --
the prefix's last separator (``-``, ``_``, ``.``), which is rarer in text than
letters, or its first character when it has none (``AKIA``) -- and builds one
detector per anchor.  The verifier keeps the prefix and replaces the body:
``ghp_...[REDACTED]``.  A body split by invisible characters or, while
incomplete, by a line break is read as one token (:mod:`.separators`).

A prefix also counts glued to the run before it (``tool_ghp_...``,
``\\nghp_...``): :mod:`.glue`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final

from .base import MARKED, MAX_READ_AHEAD, PLACEHOLDER, TOK, Hit, Rule, gate
from .cloud import CLOUD
from .glue import GLUED_MIN, glue_behind, glued, glued_end, starts_run
from .private_keys import AGE
from .providers import AI, DEV, SAAS
from .separators import SEP_START, line_breaks, token_end, token_unsettled
from .values import plausible
from .vendor import Vendor

VENDORS: Final[tuple[Vendor, ...]] = (*AI, *DEV, *SAAS, *CLOUD, *AGE)


def _prefixes() -> Iterator[tuple[str, Vendor]]:
    for v in VENDORS:
        for prefix in v.prefixes:
            yield prefix, v


def _anchor_index(prefix: str) -> int:
    """Where a prefix is anchored: its last separator, which is rarer than letters."""
    return max(0, max(prefix.rfind(c) for c in "-_."))


# anchor char -> ((offset of the anchor in the prefix, prefix length, {prefix: vendor}), ...)
_AT: Final[dict[str, tuple[tuple[int, int, dict[str, Vendor]], ...]]] = {}


def _index() -> None:
    shapes: dict[str, dict[tuple[int, int], dict[str, Vendor]]] = {}
    for prefix, v in _prefixes():
        i = _anchor_index(prefix)
        shapes.setdefault(prefix[i], {}).setdefault((i, len(prefix)), {})[prefix] = v
    for anchor, by_shape in shapes.items():
        _AT[anchor] = tuple((i, n, d) for (i, n), d in sorted(by_shape.items()))


_index()


def _match(v: Vendor, loose: bool = False) -> Callable[[str, int, int], int | None]:
    pattern = v.loose if loose else v.exact

    def match(text: str, start: int, endpos: int) -> int | None:
        m = pattern.match(text, start, endpos)
        if m is None or (v.random and not plausible(m.group("body"))):
            return None
        return m.end()
    return match


_MATCH: Final = {v.name: _match(v) for v in VENDORS}
_LOOSE: Final = {v.name: _match(v, loose=True) for v in VENDORS}


def _candidates(text: str, p: int) -> Iterator[tuple[Vendor, int, int, int]]:
    """(vendor, prefix start, body start, prefix length) of each prefix that ends or sits
    at anchor ``p``."""
    for offset, length, prefixes in _AT.get(text[p], ()):
        start = p - offset
        v = prefixes.get(text[start : start + length]) if start >= 0 else None
        if v is None:
            continue
        keep = v.keep.match(text, start)
        if keep is not None:
            yield v, start, keep.end(), length


_RUN_ON: Final = re.compile(r"[A-Za-z0-9]++[A-Za-z0-9_-]*+")


def _run_on(text: str, end: int, limit: int) -> int:
    """``end``, or the end of its run when letters or digits follow it: a body cut at its
    vendor's longest is redacted to the end of its run (read up to ``limit``), so that no
    rest of it is left for a second pass to take for a token of its own."""
    m = _RUN_ON.match(text, end, min(len(text), limit))
    return end if m is None else m.end()


def _verify(text: str, p: int) -> Hit | None:
    for v, start, body, length in _candidates(text, p):
        if starts_run(text, start):
            end = token_end(text, start, body, _MATCH[v.name])
            if end is not None:
                end = _run_on(text, end, p + MAX_READ_AHEAD)
                return body, end, MARKED + line_breaks(text, body, end)
        elif length >= GLUED_MIN and glued(text, start):
            end = glued_end(text, start, body, _LOOSE[v.name])
            if end is not None:
                return body, end, MARKED
    return None


def _unsettled(text: str, p: int, end: int) -> bool:
    # Only a token that starts its run may join a line break (a glued one never joins).
    return any(starts_run(text, start) and token_unsettled(text, start, body, _MATCH[v.name], end)
               for v, start, body, _ in _candidates(text, p))


_ANY_PREFIX: Final = re.compile(
    "|".join(sorted({re.escape(p) for p, _ in _prefixes()}, key=len, reverse=True))
)


def value_replacement(value: str) -> str:
    """Placeholder for a whole secret value: keeps a vendor prefix when it has one."""
    if _ANY_PREFIX.match(value) is None:  # one regex instead of ~100 in the common case
        return PLACEHOLDER
    for v in dict.fromkeys(v for p, v in _prefixes() if p[0] == value[0]):
        m = v.exact.match(value)
        if m is not None:
            return m.group("keep") + MARKED
    return PLACEHOLDER


def vendor_match(value: str) -> bool:
    """Whether ``value`` is, as a whole, a vendor-prefixed credential."""
    if _ANY_PREFIX.match(value) is None:
        return False
    return any(_MATCH[v.name](value, 0, len(value)) == len(value)
               for v in dict.fromkeys(v for p, v in _prefixes() if p[0] == value[0]))


# --------------------------------------------------------------- detectors
#: A body's start: 8 body characters, or fewer and then a separator (a split token).
_START_BODY: Final = f"(?:[A-Za-z0-9_+/=-]{{8}}|[A-Za-z0-9_+/=-]{{0,7}}{SEP_START})"
_BODY_AHEAD: Final = f"(?={_START_BODY})"


def _self_overlaps(literal: str) -> bool:
    """Whether two occurrences of ``literal`` can overlap (then finditer could skip one)."""
    return any(literal.endswith(literal[:k]) for k in range(1, len(literal)))


def _detectors() -> list[str]:
    ends: dict[str, list[str]] = {}  # anchor -> prefixes ending with it (sk-, ghp_)
    mids: dict[str, list[str]] = {}  # anchor -> prefixes with it inside (hooks.slack.com/)
    starts: dict[str, list[str]] = {}  # first char -> prefixes anchored there (AKIA)
    for prefix, _ in _prefixes():
        i = _anchor_index(prefix)
        if i == len(prefix) - 1:
            ends.setdefault(prefix[i], []).append(prefix)
        elif i == 0:
            starts.setdefault(prefix[0], []).append(prefix)
        else:
            mids.setdefault(prefix[i], []).append(prefix)
    out = []
    for anchor in sorted(ends.keys() | mids.keys()):
        end, mid = sorted(set(ends.get(anchor, []))), sorted(set(mids.get(anchor, [])))
        alts = []
        if end:
            alts.append(f"{_BODY_AHEAD}(?:{_prefix_behind(end)})")
        for m in mid:
            i = _anchor_index(m) + 1
            lead, rest = re.escape(m[:i]), re.escape(m[i:])
            alts.append(f"(?<={lead})(?<![{TOK}][\\s\\S]{{{i}}})(?={rest})")
        g = gate([m[: _anchor_index(m)] for m in end + mid], False, re.escape(anchor))
        out.append(f"{re.escape(anchor)}{g}(?:{'|'.join(alts)})")
    for first, prefixes in sorted(starts.items()):
        literals = sorted(set(prefixes))
        if len(literals) == 1 and not _self_overlaps(literals[0]):  # dapi, EAAA: whole literal
            lit = re.escape(literals[0])
            out.append(f"{lit}{_run_start(f'[{TOK}]{lit}', len(literals[0]))}(?={_START_BODY})")
        else:
            rest = "|".join(re.escape(x[1:]) for x in literals)
            glue = max(map(len, literals))  # the verifier checks each prefix's own length
            out.append(f"{re.escape(first)}{_run_start(f'[{TOK}]{re.escape(first)}', glue, 1)}"
                       f"(?=(?:{rest}){_START_BODY})")
    return out


def _run_start(behind: str, length: int, n: int | None = None) -> str:
    """A prefix of ``length`` characters, ``n`` (default: all) of them matched so far,
    starts a token run (``behind``, a negative look-behind's pattern, does not match) or,
    when long enough, is glued."""
    alone = f"(?<!{behind})"
    if length < GLUED_MIN:
        return alone
    return f"(?:{alone}|{glue_behind(length if n is None else n)})"


def _prefix_behind(words: list[str]) -> str:
    """Look-behinds at a prefix's end, one per prefix length (``re`` needs fixed width):
    one of ``words`` ends here, and starts its run or is glued."""
    by_length: dict[int, list[str]] = {}
    for w in words:
        by_length.setdefault(len(w), []).append(w)
    alts = []
    for n, ws in sorted(by_length.items()):
        behind = f"[{TOK}][\\s\\S]{{{n}}}"
        alts.append(f"(?<=(?:{'|'.join(map(re.escape, ws))})){_run_start(behind, n)}")
    return "|".join(alts)


RULES: Final[tuple[Rule, ...]] = tuple(
    Rule("vendor", re.compile(d), _verify, _unsettled) for d in _detectors()
)
