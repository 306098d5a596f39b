"""The environment a sandboxed command starts with: an allowlist.

A sandbox gets a credential-free baseline of the worker's variables
(:data:`SANDBOX_BASELINE`: locations, locale, terminal, time zone) plus the
names the operator forwards explicitly (``SBX_FORWARD_ENV``, a backend's
``forward_env``). Nothing else of the worker's environment -- its signing key,
broker and database URLs, cloud tokens, whatever an operator's shell exported
-- reaches a sandbox.

Processes that are not sandboxes but clients of one (the ``apptainer`` CLI, told
to clean the environment of what it runs) get :func:`client_environment`:
the worker's environment minus anything that looks like a credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SANDBOX_BASELINE = (
    "HOME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
)
"""Worker variables every sandbox gets: where things are and how to print, never a secret."""

# Names that hold the worker's credentials or look like they hold someone's.
_SECRET_NAME = re.compile(
    r"(^SBX_)|(^(CELERY|BROKER|REDIS|RABBITMQ|AMQP|DATABASE|DB)_)|SECRET|TOKEN|PASSWORD|PASSWD"
    r"|PASS$|CREDENTIAL|PRIVATE_KEY|MASTER_KEY|API_?KEY|ACCESS_KEY|AUTH|SESSION_KEY|_URL$|_DSN$"
    r"|^AWS_|^MODAL_|^DAYTONA_|^VERCEL_|^GOOGLE_APPLICATION",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """True for variable names that look like they hold a credential."""
    return bool(_SECRET_NAME.search(name))


def sandbox_environment(
    source: Mapping[str, str], forward: Iterable[str] = (), extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The baseline names of ``source``, plus the names in ``forward``, plus ``extra``.

    A forwarded name missing from ``source`` is skipped; ``extra`` wins over both.
    """
    names = (*SANDBOX_BASELINE, *forward)
    env = {name: source[name] for name in names if name in source}
    if extra:
        env.update(extra)
    return env


def client_environment(source: Mapping[str, str], forward: Iterable[str] = ()) -> dict[str, str]:
    """``source`` minus credential-looking names (kept when named in ``forward``), for
    client processes whose own tool keeps the worker's environment out of the sandbox."""
    forwarded = set(forward)
    return {k: v for k, v in source.items() if k in forwarded or not is_secret_name(k)}
