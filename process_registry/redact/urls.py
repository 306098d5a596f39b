"""Credentials in URLs: ``scheme://user:password@host``, ``//user:password@host``, ``https://TOKEN@host``.

The password goes, the user name stays (``postgres://app:[REDACTED]@db``).  A
password may itself contain ``@``: the userinfo ends at the *last* ``@``
before the host's path.  A user name alone is a credential when it looks like
one (``https://ghp_...@github.com``, ``https://<20 random chars>@host``): at
least 12 token characters with a digit, both letter cases, all upper case, or
30 letters without a separator -- ``git@``, ``ec2-user@``,
``firstname_lastname@`` stay.  Credentials in query
parameters (``?access_token=``) are key/value forms (:mod:`.key_value`).
"""

from __future__ import annotations

import re
from typing import Final

from .base import Hit, Rule, rule
from .values import is_non_secret_value, plausible
from .vendors import value_replacement

_MAX_AUTHORITY: Final = 512
_AUTHORITY: Final = re.compile(rf"""[^\s/?#"'<>`\\]{{1,{_MAX_AUTHORITY}}}+""")
_TOKEN_USER: Final = re.compile(r"[A-Za-z0-9_-]{12,256}")
#: Before a scheme-relative ``//user:pw@host``: nothing, a blank, a quote, a bracket.
_OPENERS: Final = frozenset(" \t\r\n\"'(=,[<>`")


def _userinfo(text: str, p: int) -> Hit | None:
    before = text[p - 1 : p]
    if before == ":":
        if not text[p - 2 : p - 1].isalnum():  # scheme://, not a "://" alone
            return None
    elif before and before not in _OPENERS:
        return None
    m = _AUTHORITY.match(text, p + 2)
    if m is None or m.end() - m.start() == _MAX_AUTHORITY:  # a run this long is no URL
        return None
    start, at = m.start(), m.group().rfind("@")
    if at <= 0:
        return None
    userinfo = m.group()[:at]
    colon = userinfo.find(":")
    if colon >= 0:
        password = userinfo[colon + 1 :]
        if is_non_secret_value(password):
            return None
        return start + colon + 1, start + at, value_replacement(password)
    if before != ":":  # a scheme-relative URL needs a password
        return None
    if _TOKEN_USER.fullmatch(userinfo) and (plausible(userinfo) or userinfo.isupper()):
        return start, start + at, value_replacement(userinfo)
    return None


RULES: Final[tuple[Rule, ...]] = (
    rule("userinfo", r"""//(?=[^\s/?#@"'<>]{0,256}+@)""", _userinfo),
)
