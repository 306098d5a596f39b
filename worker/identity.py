"""This deployment's session-token signer, as the settings configure it."""

from __future__ import annotations

from process_registry.sessions import SessionSigner, load_or_create_secret
from worker.settings import Settings


def load_signer(settings: Settings) -> SessionSigner:
    """The signer for this deployment's secret (``SBX_SECRET_KEY`` or the generated file)."""
    if settings.secret_key is not None:
        return SessionSigner(settings.secret_key.get_secret_value().encode())
    return SessionSigner(load_or_create_secret(settings.secret_path))
