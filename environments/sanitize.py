"""The environment a sandboxed command starts with.

The worker's own secrets (its signing key, broker credentials, cloud tokens)
never reach a sandbox unless the operator forwards a name explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# Names that hold the worker's credentials or look like they hold someone's.
_SECRET_NAME = re.compile(
    r"(^SBX_)|(^(CELERY|BROKER|REDIS)_)|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY"
    r"|API_?KEY|ACCESS_KEY|AUTH|SESSION_KEY|^AWS_|^MODAL_|^DAYTONA_|^VERCEL_|^GOOGLE_APPLICATION",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """True for variable names the worker must not hand to a sandbox by default."""
    return bool(_SECRET_NAME.search(name))


def sandbox_environment(
    source: Mapping[str, str], forward: Iterable[str] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``source`` minus secret-looking names, plus the names in ``forward``, plus ``extra``."""
    forwarded = set(forward)
    env = {k: v for k, v in source.items() if k in forwarded or not is_secret_name(k)}
    if extra:
        env.update(extra)
    return env
