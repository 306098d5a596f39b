"""sbx's own credentials, in any context.

Session tokens ``sbx1.<43 base64url>``, ``sbx2.<key id>.<expiry>.<mac>``,
approver credentials ``sbxa1.<base64url>`` -- in general ``sbx``, an optional
lower-case letter, digits, a dot and 16 or more of ``[A-Za-z0-9._-]``.  The
version stays (``sbx2...[REDACTED]``); everything after it goes.  A token split
by invisible characters, or while incomplete by a line break, is one token.
"""

from __future__ import annotations

import re
from typing import Final

from .base import MARKED, Hit, Rule, rule
from .separators import SEP_START, line_breaks, token_end, token_unsettled

_PREFIX: Final = re.compile(r"sbx[a-z]?[0-9]{1,9}\.")
# Dots inside only: a sentence's final dot is not part of the token.
_TOKEN: Final = re.compile(r"sbx[a-z]?[0-9]{1,9}\.(?:[A-Za-z0-9_-]|\.(?=[A-Za-z0-9_-])){16,8192}+")


def _match(text: str, start: int, endpos: int) -> int | None:
    m = _TOKEN.match(text, start, endpos)
    return None if m is None else m.end()


def _verify(text: str, p: int) -> Hit | None:
    prefix = _PREFIX.match(text, p)
    if prefix is None:
        return None
    end = token_end(text, p, prefix.end(), _match)
    if end is None:
        return None
    return prefix.end() - 1, end, MARKED + line_breaks(text, prefix.end(), end)


def _unsettled(text: str, p: int, end: int) -> bool:
    prefix = _PREFIX.match(text, p, end)
    return prefix is not None and token_unsettled(text, p, prefix.end(), _match, end)


RULES: Final[tuple[Rule, ...]] = (
    rule("sbx", rf"sbx(?<![A-Za-z0-9_-]sbx)(?=[a-z]?[0-9]{{1,9}}\.(?:[A-Za-z0-9._-]{{8}}"
                rf"|[A-Za-z0-9._-]{{0,7}}{SEP_START}))", _verify, _unsettled),
)
