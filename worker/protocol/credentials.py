"""What session ids, tokens and the MACs over messages look like on the wire.

Both sides and the process layer share one definition of these formats, kept in a
leaf of that lower layer (:mod:`process_registry.tokens`); the protocol and its
clients take them from here.
"""

from __future__ import annotations

from process_registry.tokens.formats import (
    V1_KID,
    InvalidSessionId,
    TokenInfo,
    approver_kid,
    token_info,
    validate_session_id,
)
from process_registry.tokens.primitives import canonical, mac, same

__all__ = [
    "V1_KID",
    "InvalidSessionId",
    "TokenInfo",
    "approver_kid",
    "canonical",
    "mac",
    "same",
    "token_info",
    "validate_session_id",
]
