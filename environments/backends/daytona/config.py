"""Settings of the daytona backend (``SBX_DAYTONA_*``, or ``daytona:`` in config.yaml);
the defaults are the safe ones.

Credentials: ``api_key``/``api_url``/``target`` here, or the SDK's own
``DAYTONA_API_KEY``/``DAYTONA_API_URL``/``DAYTONA_TARGET`` when these are unset
(the SDK reads those itself). The key never reaches a sandbox, a log line, an
error message or a receipt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from environments.config import FleetConfig


class DaytonaConfig(FleetConfig):
    """How sbx creates and keeps Daytona sandboxes."""

    type: Literal["daytona"] = "daytona"
    api_key: SecretStr | None = None
    """API key; ``DAYTONA_API_KEY`` when unset."""
    api_url: str | None = None
    """API base URL (``https://app.daytona.io/api``); ``DAYTONA_API_URL`` when unset."""
    target: str | None = None
    """Region; ``DAYTONA_TARGET`` (or the organization's default) when unset."""

    snapshot: str | None = None
    """Snapshot to create sandboxes from; Daytona's default snapshot when neither is set."""
    image: str | None = None
    """Container image to build sandboxes from (instead of a snapshot)."""
    cpu: int = Field(default=1, ge=1)
    memory: int = Field(default=1, ge=1)
    """GiB."""
    disk: int = Field(default=3, ge=1)
    """GiB. cpu, memory and disk apply to image-based sandboxes (a snapshot fixes its own)."""

    network_allow_list: tuple[str, ...] = ()
    """CIDRs the sandbox may reach. Empty (and no domains, no ``network_open``): no network."""
    domain_allow_list: tuple[str, ...] = ()
    network_open: bool = False
    """Unrestricted outbound network; only when explicitly asked for."""

    auto_stop_interval: int = Field(default=15, ge=0)
    """Minutes without activity before Daytona stops the sandbox (0: never). sbx keeps a
    session's sandbox active while the session is leased or runs background processes."""
    auto_archive_interval: int = Field(default=24 * 60, ge=0)
    """Minutes stopped before it is archived (0: Daytona's maximum)."""
    auto_delete_interval: int = Field(default=7 * 24 * 60, ge=-1)
    """Minutes stopped before it is deleted (-1: never, 0: as soon as it stops)."""
    ephemeral: bool = False
    """Delete the sandbox as soon as it stops (overrides ``auto_delete_interval``)."""
    on_close: Literal["delete", "stop", "keep"] = "delete"
    """What closing the session does to its sandbox."""

    labels: dict[str, str] = {}
    """Extra labels; sbx always sets ``sbx``, ``sbx.session``, ``sbx.worker``, ``sbx.config``,
    ``sbx.fleet``."""
    env: dict[str, str] = {}
    """Variables set in the sandbox (the worker's own environment never is)."""
    os_user: str | None = None
    workdir: str | None = None
    """Starting directory of a session; the sandbox's work directory when unset."""
    shell: Literal["auto", "sh", "bash"] = "auto"

    kill_grace: float = 2.0
    create_timeout: float = 180.0
    """Seconds for creating or starting a sandbox."""
    request_timeout: float = 30.0
    """Seconds for any other call to the service."""
    activity_interval: float = 60.0
    """At most this often a command also refreshes the sandbox's activity clock."""

    @model_validator(mode="after")
    def _one_source(self) -> DaytonaConfig:
        if self.image and self.snapshot:
            raise ValueError("set either image or snapshot, not both")
        for key in self.labels:
            if key == "sbx" or key.startswith("sbx."):
                raise ValueError(f"label {key!r} is reserved for sbx")
        return self

    @property
    def network_block_all(self) -> bool:
        """Daytona's ``network_block_all``: True unless some network was allowed."""
        return not (self.network_open or self.network_allow_list or self.domain_allow_list)

    def fingerprint(self) -> str:
        """Hash of the settings that shape a sandbox (and its fleet, unless the default);
        part of its name and labels."""
        return self.shaping_hash(
            {
                "api_url", "target", "snapshot", "image", "cpu", "memory", "disk",
                "network_allow_list", "domain_allow_list", "network_open", "env", "os_user",
                "labels", "ephemeral",
            }
        )  # fmt: skip
