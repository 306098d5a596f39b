"""Settings of the ``vercel_sandbox`` backend (``SBX_VERCEL_SANDBOX_*``), safe by default."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import SecretStr

from environments.config import BackendConfig


class VercelConfig(BackendConfig):
    """One Vercel Sandbox per session. Defaults: no network, 2 vCPUs, 15 minutes at a time.

    Credentials, first found wins: ``token`` (+ ``team_id``, ``project_id``), ``oidc_token``,
    then -- unless ``read_vercel_env`` is off -- the SDK's own ``VERCEL_OIDC_TOKEN``, or
    ``VERCEL_TOKEN`` with ``VERCEL_TEAM_ID`` and ``VERCEL_PROJECT_ID`` (the SDK's variables,
    read by this backend's SDK adapter, never by the SDK itself). They are handed to the SDK
    through its credentials factory only; they never reach a sandbox, a log or a receipt.
    """

    type: Literal["vercel_sandbox"] = "vercel_sandbox"
    base_url: str | None = None
    """Sandbox API base URL; the SDK's default (``https://vercel.com/api``) when unset."""
    token: SecretStr | None = None
    team_id: str | None = None
    project_id: str | None = None
    oidc_token: SecretStr | None = None
    read_vercel_env: bool = True
    """Also read ``VERCEL_OIDC_TOKEN`` / ``VERCEL_TOKEN`` / ``VERCEL_TEAM_ID`` /
    ``VERCEL_PROJECT_ID`` from the worker's environment."""

    image: str | None = None
    """Vercel Container Registry image (e.g. a managed image); the service's default when unset."""
    region: str | None = None
    vcpus: int = 2
    memory_mb: int | None = None
    """Memory in MB; the service derives it from ``vcpus`` when unset."""
    network_allow: tuple[str, ...] = ()
    """Domains the sandbox may reach; empty (the default) means no network at all."""
    env: dict[str, str] = {}
    """Variables set in the sandbox (the worker's own environment never is)."""
    persistent: bool = False
    """Persistent sandboxes keep their files across stop/resume (resumed from a snapshot)."""

    execution_time_limit: float = 900.0
    """Seconds a runtime session may run before the service stops it."""
    extend_by: float = 600.0
    """Seconds added when a busy or leased session comes within ``extend_margin`` of its limit."""
    extend_margin: float = 300.0
    on_close: Literal["destroy", "stop", "keep"] = "destroy"
    """What ``close()`` does to the sandbox: destroy it, stop it (resumable), or leave it."""
    name_prefix: str = "sbx"

    shell: Literal["auto", "sh", "bash"] = "auto"
    stream_encoder: Literal["auto", "python3", "node", "none"] = "auto"
    """How the session shell's bytes cross the service's text-only log stream: base64 lines
    written by ``python3`` or ``node`` in the sandbox (``auto``: the first found), or ``none``
    (plain text: invalid UTF-8 in output arrives as U+FFFD)."""
    kill_grace: float = 2.0
    connect_timeout: float = 10.0
    request_timeout: float = 60.0

    def fingerprint(self) -> str:
        """Hash of the settings that shape a sandbox; part of its name."""
        shaping = self.model_dump(
            include={
                "image",
                "region",
                "vcpus",
                "memory_mb",
                "network_allow",
                "env",
                "persistent",
                "project_id",
                "team_id",
                "base_url",
            }
        )
        return hashlib.sha256(repr(sorted(shaping.items())).encode()).hexdigest()[:12]


def sandbox_name(session_id: str, config: VercelConfig) -> str:
    """Deterministic sandbox name: a restarted worker (or a racing one) finds the same."""
    slug = re.sub(r"[^a-z0-9-]", "-", session_id.lower())[:32].strip("-") or "s"
    digest = hashlib.sha256(f"{session_id}\0{config.fingerprint()}".encode()).hexdigest()[:12]
    return f"{config.name_prefix}-{slug}-{digest}"
