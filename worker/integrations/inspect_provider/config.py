"""What an eval may say about its ``sbx`` sandboxes."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

CONFIG_FILE = "sbx.yaml"
"""The configuration file inspect finds beside a task that names ``sandbox="sbx"``."""

_BACKEND = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}\Z")


class SbxSandboxConfig(BaseModel):
    """The configuration of ``sandbox=("sbx", ...)``; every field is optional.

    A plain string in its place is a YAML file of these fields (``sbx.yaml`` beside the
    task is found by itself) or, when no such file exists, a backend name
    (``("sbx", "docker")``, ``--sandbox sbx:docker``). Broker, secret and backend
    settings come from sbx's own configuration (``SBX_*``, ``$SBX_HOME/config.yaml``),
    as for any client.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str | None = None
    """The sbx backend of every sample's sandbox; the deployment's ``SBX_BACKEND`` if unset."""
    broker_url: str | None = None
    """The broker of the workers; ``SBX_BROKER_URL`` (or the embedded one) if unset."""
    workdir: str | None = None
    """The samples' working directory, made if missing and left in place afterwards;
    unset: a fresh directory per sample under the sandbox's ``$TMPDIR`` (or ``/tmp``),
    removed when the sample ends."""
    session_prefix: str = Field(default="inspect", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$")
    """Start of each sample's sbx session id (``<prefix>-<task>-<random>``)."""
    exec_timeout: int | None = Field(default=None, ge=1)
    """Seconds an ``exec`` without a timeout may run; the client's ``max_timeout`` if unset."""


def resolve_config(config: object) -> SbxSandboxConfig:
    """``config`` as inspect passes it (None, a backend name, a dict or the model) as the model.

    Raises ``TypeError`` for anything else and pydantic's ``ValidationError`` for bad fields.
    """
    if config is None:
        return SbxSandboxConfig()
    if isinstance(config, SbxSandboxConfig):
        return config
    if isinstance(config, str):
        return _from_text(config)
    if isinstance(config, dict):
        return SbxSandboxConfig.model_validate(config)
    if isinstance(config, BaseModel):
        return SbxSandboxConfig.model_validate(config.model_dump())
    raise TypeError(f"the sbx sandbox takes a backend name or SbxSandboxConfig, not {config!r}")


def _from_text(text: str) -> SbxSandboxConfig:
    """A config file's fields, or a backend name (inspect makes every string config a path
    under the task's directory: its last part is the name then)."""
    path = Path(text)
    if path.is_file():
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} must hold a mapping of sbx sandbox settings")
        return SbxSandboxConfig.model_validate(loaded)
    if _BACKEND.match(path.name):
        return SbxSandboxConfig(backend=path.name)
    raise FileNotFoundError(f"no sbx sandbox config file {text}, nor is it a backend name")
