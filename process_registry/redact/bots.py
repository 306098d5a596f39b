"""Bot tokens without a vendor prefix: Discord (``<id>.<time>.<mac>``), Telegram (``<id>:<key>``).

Both keep their public part -- the bot's id -- and lose the secret:
``MTk4NjIy...NDQ4.[REDACTED]``, ``123456789:[REDACTED]`` (bare, after ``bot``
in ``api.telegram.org/bot<id>:<secret>/getMe``, or in any other context).
"""

from __future__ import annotations

import re
from typing import Final

from .base import PLACEHOLDER, Hit, Rule, rule
from .values import looks_random

# Discord: base64 of the bot's id (starts M, N or O), a dot, 6-7 chars of time, a dot, the HMAC.
_DISCORD_ID_REV: Final = re.compile(r"[A-Za-z0-9_-]{23,27}[MNO](?![A-Za-z0-9_-])")
_DISCORD_REST: Final = re.compile(
    r"[A-Za-z0-9_-]{6,7}\.(?P<mac>[A-Za-z0-9_-]{27,40}+)(?![A-Za-z0-9_-])"
)


def _discord(text: str, p: int) -> Hit | None:
    """Anchored on the first dot; the id before it stays."""
    if _DISCORD_ID_REV.match(text[max(0, p - 29) : p][::-1]) is None:
        return None
    m = _DISCORD_REST.match(text, p + 1)
    if m is None or not looks_random(m.group("mac")):
        return None
    return p + 1, m.end(), PLACEHOLDER


# Telegram: 6-16 digits of bot id (alone, or after "bot"), a colon, 30-50 chars of secret.
_TG_ID: Final = re.compile(r"(?:(?<![A-Za-z0-9_-])|(?<=bot))[0-9]{6,16}\Z")
_TG_SECRET: Final = re.compile(r"[A-Za-z0-9_-]{30,50}+(?![A-Za-z0-9_-])")


def _telegram(text: str, p: int) -> Hit | None:
    if _TG_ID.search(text, max(0, p - 17), p) is None:
        return None
    m = _TG_SECRET.match(text, p + 1)
    if m is None or not looks_random(m.group()):
        return None
    return p + 1, m.end(), PLACEHOLDER


RULES: Final[tuple[Rule, ...]] = (
    rule("discord", r"\.(?=[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27})", _discord),
    rule("telegram", r":(?<=[0-9]:)(?=[A-Za-z0-9_-]{30})", _telegram),
)
