"""Which values are not secrets, and which bodies look like one.

A value under a secret-naming key is redacted unless it is one of: empty; a
reference (``$VAR``, ``${VAR}``, ``${{ secrets.X }}``, ``{{ x }}``,
``%VAR%``, ``<your-token>``, ``{placeholder}``, ``%(name)s``); a boolean or
null; a mask (``****``, ``xxx``); a placeholder (``your_api_key_here``,
``foo``, ``example``); a file path (``/run/secrets/db``, ``~/.ssh/id_rsa``); or
our own output (``[REDACTED]``, ``sk-...[REDACTED]``), so redacting twice
equals redacting once.
"""

from __future__ import annotations

import re
from typing import Final

_REFERENCE_RE: Final = re.compile(
    r"\$[A-Za-z_][A-Za-z0-9_]*|\$\{[^{}\s]{1,256}\}|\$\{\{.{0,256}\}\}|\$\(.{0,256}\)"
    r"|\{\{.{0,256}\}\}|%[A-Za-z_][A-Za-z0-9_]*%|<[^<>]{0,256}>"
    # Python/JS templates: {password}, {self.db_pass}, {cfg['key']}, %(password)s
    r"|\{[A-Za-z_][A-Za-z0-9_.\[\]'\"]{0,128}\}|%\([A-Za-z_][A-Za-z0-9_]{0,64}\)[sdr]"
)
_NON_SECRET_WORDS: Final = frozenset({"true", "false", "null", "none", "nil", "undefined"})
_MASK_RE: Final = re.compile(r"[*•]{1,64}|[xX]{3,64}|[.#-]{1,3}|\.{3}|…|\**\[REDACTED\]\**")
_PLACEHOLDER_WORD_RE: Final = re.compile(
    r"(?i:(?:your|insert|enter|replace|put|paste)[_-][a-z0-9_-]{1,64}|[a-z0-9_-]{1,64}[_-]here"
    r"|replace[_-]?me|change[_-]?this|placeholder[a-z0-9_-]{0,64}|example[a-z0-9_-]{0,64}"
    r"|dummy|sample|redacted|foo|bar|baz|qux|todo|tbd)"
)
#: A file path -- home-relative, relative, or under a usual root directory -- names
#: where a secret is kept, not the secret (base64 may start with "/" too: hence the roots).
_PATH_RE: Final = re.compile(
    r"(?:~|\.{1,2}|/(?:home|Users|root|run|var|etc|tmp|opt|usr|srv|mnt|secrets|data|app|workspace"
    r"|proc|dev|media|private|Volumes))(?:/[A-Za-z0-9_.@%+~-]{1,128}){1,32}/?"
)
#: Our own output, so that redacting twice changes nothing.
PLACEHOLDER_RE: Final = re.compile(r"(?:[A-Za-z0-9_.:/-]{0,40}\.\.\.)?\[REDACTED\]")
_HAS_DIGIT: Final = re.compile(r"[0-9]")
_HAS_UPPER: Final = re.compile(r"[A-Z]")
_HAS_LOWER: Final = re.compile(r"[a-z]")
_ONE_RUN: Final = re.compile(r"[A-Za-z0-9]{30,}")


def looks_random(body: str) -> bool:
    """Random-looking: has a digit, or both letter cases (kebab-case words are not)."""
    if _HAS_DIGIT.search(body):
        return True
    return bool(_HAS_UPPER.search(body) and _HAS_LOWER.search(body))


def plausible(body: str) -> bool:
    """A token body after a short vendor prefix: random-looking, or one long letter run.

    ``sk-learn-style-transfer`` (words) is not; ``sk-`` + 30 letters without a
    separator is (no word is that long).
    """
    return looks_random(body) or _ONE_RUN.fullmatch(body) is not None


def is_non_secret_value(value: str) -> bool:
    """Values kept as they are (see the module docstring)."""
    v = value.strip()
    if not v:
        return True
    first = v[0]
    # Cheap first-character tests keep the common (secret) case to a few checks.
    return (
        (len(v) < 10 and v.lower() in _NON_SECRET_WORDS)
        or (first in "$%{<" and _REFERENCE_RE.fullmatch(v) is not None)
        or (first in "*•x.#-[X…" and _MASK_RE.fullmatch(v) is not None)
        or ("[REDACTED]" in v and PLACEHOLDER_RE.fullmatch(v) is not None)
        or (first in "/~." and _PATH_RE.fullmatch(v) is not None)
        or _PLACEHOLDER_WORD_RE.fullmatch(v) is not None
    )
