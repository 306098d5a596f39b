"""The shape of a vendor-prefixed credential, shared by the provider and cloud tables."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import TOK


@dataclass(frozen=True)
class Vendor:
    """A credential with a fixed, non-secret prefix: the prefix is shown, the body replaced.

    ``exact`` is matched at the prefix start and has groups ``keep`` (the
    prefix) and ``body``; a ``pair`` secret (Twilio's ``SK...:secret``) is part
    of the body.  ``random`` bodies must be :func:`~.values.plausible`.
    ``minimum`` is the shortest body: shorter, the token is *incomplete* and
    may continue after a line break.
    """

    name: str
    prefixes: tuple[str, ...]  # literal prefixes, used to build the detectors
    exact: re.Pattern[str]
    keep: re.Pattern[str]
    random: bool
    loose: re.Pattern[str]
    """``exact`` without its left boundary: for a prefix glued to what comes before it."""


def vendor(
    name: str, prefixes: tuple[str, ...], keep: str, body: str, *, fixed: bool = False,
    random: bool = False, closed: bool = False, pair: str = "",
) -> Vendor:
    """Build a :class:`Vendor`.

    The left boundary stops "task-..." from matching "sk-" and keeps every
    candidate at the start of its token run, so runs read by rejected
    candidates never overlap.  ``fixed`` bodies (exact length) also need a
    right boundary; run bodies are possessive and stop at the run's end, and
    ``closed`` ones must end their token run (``am_`` + 24 alphanumerics, not
    ``am_example_identifier``).
    """
    tail = f"(?![{TOK}])" if closed else "(?![A-Za-z0-9])" if fixed else ""
    pair_re = f"(?::{pair})?" if pair else ""
    token = rf"(?P<keep>(?>{keep}))(?P<body>{body}{tail}{pair_re})"
    exact = re.compile(rf"(?<![{TOK}]){token}")
    return Vendor(name, prefixes, exact, re.compile(keep), random, re.compile(token))
