"""The approver credential: what a platform's approver holds, and a sandbox never sees.

``sbxa1.<kid>.<mac>`` -- a MAC under key ``kid`` (a sub-key derived for this
purpose alone, so no session token can ever equal it). Minted from the
secret key (``sbx approver token``), given to the platform's approval path
(``SBX_APPROVER_TOKEN``), never to a session. Removing key ``kid`` from the
keyring revokes every approver credential minted with it.
"""

from __future__ import annotations

from .formats import APPROVER_PREFIX, approver_kid
from .keyring import Keyring
from .primitives import mac, same

_PURPOSE = "approver:v1"


def approver_token(keyring: Keyring, kid: str | None = None) -> str | None:
    """The approver credential of key ``kid`` (default: the signing key); None if unknown."""
    key = keyring.signing if kid is None else keyring.get(kid)
    if key is None:
        return None
    return f"{APPROVER_PREFIX}{key.kid}.{mac(key.derived(_PURPOSE), 'sbx-approver', key.kid)}"


def verify_approver(keyring: Keyring, token: str | None) -> bool:
    """True only for a valid approver credential of a key in ``keyring``."""
    kid = approver_kid(token)
    return kid is not None and same(approver_token(keyring, kid), token)
