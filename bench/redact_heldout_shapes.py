"""The held-out case shape and the generators its two sources share.

The cases (:mod:`bench.redact_heldout_reference`, :mod:`bench.redact_heldout_scanner`)
are never used by the test suite.  A positive lists its ``secrets``: no
8-character window of any of them may survive.  ``keep`` lists context that must
survive.  A negative (no secrets) must come back unchanged.  Fake credentials are
assembled at import time from a seeded generator, so no file holds a literal a
secret scanner would flag.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

RNG = random.Random(1414)
LOW = string.ascii_lowercase + string.digits
ALNUM = string.ascii_letters + string.digits
TOK = ALNUM + "_-"
HEX = "0123456789abcdef"
UP = string.ascii_uppercase + string.digits
DIG = string.digits


def r(n: int, alphabet: str = ALNUM) -> str:
    """``n`` random characters; with a digit when the alphabet has digits."""
    while True:
        s = "".join(RNG.choice(alphabet) for _ in range(n))
        if not any(c.isdigit() for c in alphabet) or any(c.isdigit() for c in s) or n < 4:
            return s


def j(*parts: str) -> str:
    return "".join(parts)


def b64(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


def b64url(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    text: str
    secrets: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    note: str = ""

    @property
    def positive(self) -> bool:
        return bool(self.secrets)


def P(id: str, text: str, *secrets: str, keep: tuple[str, ...] = (), note: str = "",
      source: str = "reference") -> Case:
    return Case(id, source, text, secrets, keep, note)


def N(id: str, text: str, note: str = "", source: str = "reference") -> Case:
    return Case(id, source, text, (), (), note)


def jwt(payload: str, sig: int = 43) -> tuple[str, str]:
    """A JWT with ``payload``, and the part of it that must not survive."""
    head = b64url('{"alg":"HS256","typ":"JWT"}')
    body = b64url(payload)
    s = r(sig, TOK)
    return j(head, ".", body, ".", s), j(body[:12], s)
