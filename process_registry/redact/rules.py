"""Every rule, in the order that breaks ties between candidates at one position."""

from __future__ import annotations

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
from .base import Rule

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
