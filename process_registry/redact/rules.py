"""Every rule, and the passes that find their candidates.

Rules whose detectors start with the same literal character share one pass:
``c(?:(?=rest1)|(?=rest2)...)`` matches one character wherever any of them
would, and its verifier asks each rule whose own detector matches there, in
the order below.  Fewer passes over the text is most of the scan's speed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from . import (
    bearer,
    bots,
    cli_args,
    cloud,
    hashes,
    key_value,
    private_keys,
    sbx_tokens,
    urls,
    vendors,
)
from .base import Hit, Rule, Unsettled, rule

RULES: Final[tuple[Rule, ...]] = (
    *vendors.RULES,  # vendor prefixes first: a key/value candidate at the same spot defers
    *sbx_tokens.RULES,
    *bots.RULES,
    *cloud.RULES,
    *urls.RULES,
    *key_value.RULES,
    *cli_args.RULES,
    *private_keys.RULES,
    *bearer.RULES,
    *hashes.RULES,
)

_SPECIAL: Final = frozenset(".^$*+?{}[]|()\\")


def _lead(pattern: str) -> tuple[str, str]:
    """Split a detector into its first literal character and the rest."""
    if pattern[0] == "\\" and not pattern[1].isalnum():
        return pattern[1], pattern[2:]
    if pattern[0] in _SPECIAL:
        raise ValueError(f"a detector must start with a literal: {pattern[:20]!r}")
    return pattern[0], pattern[1:]


def _verify_first(members: tuple[Rule, ...]) -> Callable[[str, int], Hit | None]:
    def verify(text: str, p: int) -> Hit | None:
        for member in members:
            if member.detector.match(text, p) is not None:
                hit = member.verify(text, p)
                if hit is not None:
                    return hit
        return None
    return verify


def _unsettled_any(members: tuple[Rule, ...]) -> Unsettled | None:
    joinable = tuple((m.detector, m.unsettled) for m in members if m.unsettled is not None)
    if not joinable:
        return None

    def unsettled(text: str, p: int, end: int) -> bool:
        return any(d.match(text, p) is not None and u(text, p, end) for d, u in joinable)
    return unsettled


def _passes(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    groups: dict[str, list[tuple[str, Rule]]] = {}
    for r in rules:
        lead, rest = _lead(r.detector.pattern)
        groups.setdefault(lead, []).append((rest, r))
    out = []
    for lead, members in groups.items():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        pattern = re.escape(lead) + "(?:" + "|".join(f"(?={rest})" for rest, _ in members) + ")"
        group = tuple(r for _, r in members)
        name = "+".join(dict.fromkeys(r.name for r in group))
        out.append(rule(name, pattern, _verify_first(group), _unsettled_any(group)))
    return tuple(out)


#: One detector per leading character, in the order of their first rule.
PASSES: Final[tuple[Rule, ...]] = _passes(RULES)
