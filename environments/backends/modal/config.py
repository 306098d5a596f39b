"""Settings of the ``modal`` backend (``SBX_MODAL_*`` / ``backends: {modal: ...}``), safe defaults.

Credentials: ``token_id``/``token_secret`` here (``SBX_MODAL_TOKEN_ID``,
``SBX_MODAL_TOKEN_SECRET``), else the SDK's own ``MODAL_TOKEN_ID``/
``MODAL_TOKEN_SECRET`` or the active profile of ``~/.modal.toml``. The API
address is the SDK's ``MODAL_SERVER_URL`` (or the profile's ``server_url``).
Credentials are kept as ``SecretStr``: they never reach a sandbox, a log line,
an error message or a receipt.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field, SecretStr

from environments.config import BackendConfig


class ModalConfig(BackendConfig):
    """Settings of the modal backend. Defaults are the hardened ones."""

    type: Literal["modal"] = "modal"
    app_name: str = "sbx"
    """The Modal App the sandboxes belong to (looked up, created if missing)."""
    environment_name: str | None = None
    """Modal environment; the profile's (or Modal's default) when unset."""
    image: str = "debian:bookworm-slim"
    """Registry image of the sandboxes (``Image.from_registry``)."""
    image_name: str | None = None
    """A named image published to Modal (``Image.from_name``); takes precedence over ``image``."""
    cpu: float = 1.0
    """CPU cores reserved (and the hard limit)."""
    memory: int = 2048
    """Memory in MiB reserved (and the hard limit)."""
    timeout: int = Field(default=3600, ge=10, le=86400)
    """Hard lifetime of a sandbox in seconds; Modal terminates it then (a new one replaces it)."""
    idle_timeout: int | None = Field(default=900, ge=10)
    """Modal ends a sandbox idle this long. A running exec counts as activity, and the session
    shell is one: this bites once the shell has ended; dead workers' sandboxes are swept by
    ``reap_orphans`` (tags) or end at ``timeout``."""
    outbound_cidr_allowlist: tuple[str, ...] | None = None
    """CIDRs a sandbox may reach. With neither allowlist set, the network is blocked."""
    outbound_domain_allowlist: tuple[str, ...] | None = None
    """Domains a sandbox may reach (``*.`` wildcards allowed)."""
    region: str | None = None
    workdir: str = "/workspace"
    env: dict[str, str] = {}
    """Variables set in the sandbox (the worker's own environment never is)."""
    shell: Literal["auto", "sh", "bash"] = "auto"
    kill_grace: float = 2.0
    token_id: SecretStr | None = None
    token_secret: SecretStr | None = None
    connect_timeout: float = 10.0
    """Seconds to reach the Modal API before a call fails as unreachable."""
    api_timeout: float = 120.0
    """Deadline of one control-plane operation (a create includes scheduling the sandbox)."""
    heartbeat_interval: float = 60.0
    """At most this often a call refreshes the ``sbx.active`` tag (the idle clock of sweeps)."""
    terminate_on_close: bool = True

    @property
    def block_network(self) -> bool:
        """No network unless the operator configured an outbound allowlist."""
        return self.outbound_cidr_allowlist is None and self.outbound_domain_allowlist is None

    def fingerprint(self) -> str:
        """Hash of the settings that shape a sandbox; part of its name and tags."""
        shaping = self.model_dump(
            include={
                "app_name", "environment_name", "image", "image_name", "cpu", "memory",
                "outbound_cidr_allowlist", "outbound_domain_allowlist", "region", "workdir",
                "env", "timeout", "idle_timeout",
            }
        )  # fmt: skip
        return hashlib.sha256(repr(sorted(shaping.items())).encode()).hexdigest()[:12]
