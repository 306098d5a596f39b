"""The key ``sbx session token`` signs with, found or (in embedded mode) created.

The same rule as the client's: without ``SBX_BROKER_URL`` this home is the
deployment (its embedded broker, its workers), so a missing key is created here,
mode 0600, for the workers to verify with. With a remote broker the key belongs to
the deployment's workers: a token minted from a new local key would never verify,
so the command stops with a clear error instead.
"""

from __future__ import annotations

from pathlib import Path

from worker.settings import Settings

from .output import EXIT_DENIED, fail


def ensure_signing_key(settings: Settings) -> Path | None:
    """Make sure a key is at hand; the path of a key created just now (None: one existed).

    Raises :class:`~worker.cli.output.CliError` (exit 3) when there is no key and the
    broker is remote.
    """
    from process_registry.sessions import load_or_create_secret

    if settings.secret_key is not None or settings.secret_path.exists():
        return None
    if settings.broker_url is not None:
        fail("no secret key here: set SBX_SECRET_KEY to the deployment's key, or run this "
             f"on a worker's machine (expected {settings.secret_path})", EXIT_DENIED)  # fmt: skip
    load_or_create_secret(settings.secret_path)
    return settings.secret_path
