"""Bearer tokens and JWTs, wherever they appear.

``Bearer <token>`` outside a header (``using Bearer x now``) loses a token of
16 or more random-looking characters.  A JWT (``eyJ<header>.eyJ<payload>.<sig>``,
base64url segments, padding tolerated) keeps ``eyJ`` and loses the rest; a
header alone (``eyJhbGciOiJIUzI1NiJ9``) decodes to ``{"alg": ...}`` and stays.
"""

from __future__ import annotations

import re
from typing import Final

from .base import MARKED, Hit, Rule, rule
from .values import looks_random
from .vendors import value_replacement

_BEARER: Final = re.compile(
    r"(?<![A-Za-z0-9])Bearer[ \t]{1,8}+(?P<tok>[A-Za-z0-9._~+/-]{16,8192}+={0,8})"
)
_JWT: Final = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,1024}+={0,2}\.ey[A-Za-z0-9_-]{8,8192}+={0,2}"
    r"(?:\.[A-Za-z0-9_-]{0,1024}+={0,2})?"
)


def _bearer(text: str, p: int) -> Hit | None:
    m = _BEARER.match(text, p)
    if m is None or not looks_random(m.group("tok")):
        return None
    return m.start("tok"), m.end("tok"), value_replacement(m.group("tok"))


def _jwt(text: str, p: int) -> Hit | None:
    m = _JWT.match(text, p - 2)
    return None if m is None else (p + 1, m.end(), MARKED)


RULES: Final[tuple[Rule, ...]] = (
    rule("bearer", r"Bearer(?=[ \t]{1,8}+[A-Za-z0-9._~+/-]{16})", _bearer),
    rule("jwt", r"J(?<=eyJ)(?<![A-Za-z0-9_-]eyJ)(?=[A-Za-z0-9_-]{8})", _jwt),
)
