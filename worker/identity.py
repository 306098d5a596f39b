"""This deployment's keys, session-token signer and approver credential, as the settings say.

Keys: ``SBX_SECRET_KEY`` (signs when set) plus the keyring under ``SBX_HOME``
(``process_registry.tokens.keyring``). A machine that holds a key may mint
session tokens and the approver credential; others need them handed over
(``SBX_SESSION_TOKEN``, ``SBX_APPROVER_TOKEN``).
"""

from __future__ import annotations

from pathlib import Path

from process_registry.sessions import SessionSigner
from process_registry.tokens.approver import approver_token
from process_registry.tokens.keyring import KeyringStore
from process_registry.tokens.sealer import Sealer
from worker.settings import Settings

_stores: dict[tuple[Path, str | None], KeyringStore] = {}


def keyring_store(settings: Settings) -> KeyringStore:
    """The keyring of ``settings`` (one store per home and key: it caches what it read)."""
    env = settings.secret_key.get_secret_value() if settings.secret_key is not None else None
    key = (settings.home, env)
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = KeyringStore(settings.home, env.encode() if env else None)
    return store


def can_mint(settings: Settings) -> bool:
    """True when this machine holds a key (``SBX_SECRET_KEY`` or a keyring under SBX_HOME)."""
    return keyring_store(settings).exists()


def load_signer(settings: Settings, *, create: bool = True) -> SessionSigner:
    """The signer over the current keyring (``create``: generate ``secret.key`` when no key
    exists at all, as a worker does on first start)."""
    store = keyring_store(settings)
    return SessionSigner(
        lambda: store.current(create=create),
        accept_v1=settings.accept_v1_tokens,
        default_ttl=settings.token_ttl,
    )


def sealer(signer: SessionSigner, purpose: str) -> Sealer:
    """Worker-only seals for ``purpose`` with ``signer``'s keyring (rotations seen)."""
    return Sealer(lambda: signer.keyring, purpose)


def local_approver_token(settings: Settings) -> str | None:
    """``SBX_APPROVER_TOKEN``, else the credential minted from the local keyring, else None."""
    if settings.approver_token is not None:
        return settings.approver_token.get_secret_value()
    if not can_mint(settings):
        return None
    return approver_token(keyring_store(settings).current())
