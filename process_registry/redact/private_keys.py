"""Private keys: PEM blocks (RSA, EC, OpenSSH, PKCS#8, PGP), age identities.

A PEM block keeps its BEGIN and END lines and loses the key material,
headers (``Proc-Type``, ``DEK-Info``) included; a block cut short (``head -3
key.pem``) loses what there is, up to :data:`~.base.MAX_SECRET` characters.  In
JSON (``"private_key": "-----BEGIN...\\n..."``) the escaped line breaks count
as line breaks.  Certificates and public keys are not secrets and stay.
Kubeconfig ``client-key-data`` (base64 of a PEM block) is a key/value form
(see :mod:`.keys`).
"""

from __future__ import annotations

import re
from typing import Final

from .base import PLACEHOLDER, Hit, Rule, rule
from .vendor import Vendor, vendor

AGE: Final[tuple[Vendor, ...]] = (
    # age secret keys are upper-case bech32; mixed case and other letters are tolerated.
    vendor("age", ("AGE-SECRET-KEY-",), "AGE-SECRET-KEY-", r"1[0-9A-Za-z]{58}", fixed=True),
    vendor("age-plugin", ("AGE-PLUGIN-",), "AGE-PLUGIN-", r"[A-Z0-9]{1,32}-1[0-9A-Z]{20,1024}+"),
)

PEM: Final = re.compile(
    r"(?<!-)-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?P<body>(?:[A-Za-z0-9+/=\s:,.\\]|-(?!----)){0,8192}+)"
    r"(?P<end>-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)


def _trim(body: str, i: int, j: int) -> tuple[int, int]:
    """Shrink [i, j) past blanks and JSON ``\\n`` escapes at both ends."""
    while i < j and (body[i].isspace() or (body[i] == "\\" and body[i + 1 : i + 2] in ("n", "r"))):
        i += 1 if body[i].isspace() else 2
    while j > i and (body[j - 1].isspace() or (j - 2 >= i and body[j - 2 : j] in ("\\n", "\\r"))):
        j -= 1 if body[j - 1].isspace() else 2
    return i, j


def _pem(text: str, p: int) -> Hit | None:
    """Private key block: the BEGIN and END lines stay, the key material goes."""
    m = PEM.match(text, p)
    if m is None:
        return None
    i, j = _trim(m.group("body"), 0, len(m.group("body")))
    return None if i >= j else (m.start("body") + i, m.start("body") + j, PLACEHOLDER)


RULES: Final[tuple[Rule, ...]] = (
    rule("pem", r"-----BEGIN(?=[ A-Z0-9]{0,40}PRIVATE KEY)", _pem),
)
