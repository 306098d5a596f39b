"""Password hashes and wallet mnemonics.

* crypt(3) hashes as in ``/etc/shadow``, ``htpasswd`` and config files --
  ``$1$``, ``$5$``, ``$6$``, ``$y$``, ``$2b$``, ``$apr1$``, ``$argon2id$``,
  ``$pbkdf2-sha256$``... -- keep their scheme and lose salt and hash
  (``root:$6$[REDACTED]:19700:0:99999:7:::``): a leaked hash is a password
  guessed offline.  LDAP-style ``{SSHA}...`` likewise.
* A wallet's recovery phrase -- 12 to 24 lower-case words under a key such as
  ``MNEMONIC``, ``SEED_PHRASE`` or ``recovery_words`` -- goes whole, separated
  by blanks or commas (:func:`mnemonic_words`, used by :mod:`.key_value`).
"""

from __future__ import annotations

import re
from typing import Final

from .base import PLACEHOLDER, Hit, Rule, rule

_SCHEMES: Final = (r"1|2[abxy]?|5|6|7|y|gy|md5|apr1|sha1|sha256|sha512|argon2(?:id|i|d)"
                   r"|pbkdf2(?:-sha(?:1|256|512))?|scrypt")
_CRYPT: Final = re.compile(rf"\$(?:{_SCHEMES})\$(?P<rest>[A-Za-z0-9./+=,$-]{{20,512}}+)")
_LAST: Final = re.compile(r"[A-Za-z0-9./+=-]{16,}\Z")
_LDAP: Final = re.compile(r"\{(?:S?SHA(?:256|384|512)?|S?MD5|PBKDF2[A-Z0-9-]{0,16})\}"
                          r"(?P<rest>[A-Za-z0-9+/=.$]{16,512}+)")


def _crypt(text: str, p: int) -> Hit | None:
    m = _CRYPT.match(text, p)
    if m is None:
        return None
    rest = m.group("rest")
    # A salt or cost, then the hash: at least one more "$" and a long last field.
    if "$" not in rest or _LAST.search(rest.rstrip("$")) is None:
        return None
    return m.start("rest"), m.end("rest"), PLACEHOLDER


def _ldap(text: str, p: int) -> Hit | None:
    m = _LDAP.match(text, p)
    return None if m is None else (m.start("rest"), m.end("rest"), PLACEHOLDER)


_MNEMONIC: Final = re.compile(
    r"[ \t]{0,32}+(?P<w>[a-z]{3,8}+(?:[ ,]{1,3}+[a-z]{3,8}+){11,31}+)(?![A-Za-z])"
)


def mnemonic_words(text: str, start: int) -> tuple[int, int] | None:
    """Span of 12-32 lower-case words (blank- or comma-separated) at ``start``, if any."""
    m = _MNEMONIC.match(text, start)
    return None if m is None else m.span("w")


RULES: Final[tuple[Rule, ...]] = (
    # A hash starts a run: "$6$6$6$..." is one candidate, not one per "$".
    rule("crypt", rf"\$(?<![A-Za-z0-9./$]\$)(?=(?:{_SCHEMES})\$)", _crypt),
    rule("ldap-hash", r"\{(?=S?SHA|S?MD5|PBKDF2)", _ldap),
)
