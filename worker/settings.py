"""One settings object for the whole process, read once (``SBX_*`` variables and config.yaml).

Values come from the environment first, then from ``$SBX_HOME/config.yaml``
(the same keys in lower case, e.g. ``broker_url: redis://...``), then defaults.
This is the only place that reads either. It also carries:

* each backend's settings: ``SBX_<BACKEND>_<KEY>`` variables over the
  ``<backend>:`` (or ``backends: {<backend>: ...}``) mappings of config.yaml,
  validated by the backend's own config model (``worker.service.backends``);
* the approval policy (``approvals``, ``command_allowlist``, ``command_denylist``);
* the tool registry's plugin settings (``plugins``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as SettingsSourceError

from worker.config_document import SettingsError as SettingsError
from worker.config_document import check_known_keys, read_config_document

log = logging.getLogger(__name__)


def default_home() -> Path:
    """``$SBX_HOME`` or ``~/.local/state/sbx``."""
    return Path(os.environ.get("SBX_HOME") or Path.home() / ".local" / "state" / "sbx")


class _YamlFileSource(InitSettingsSource):
    """Settings from ``$SBX_HOME/config.yaml``; a missing file contributes nothing, one
    that cannot be used (unreadable, not YAML, an unknown key) is a :class:`SettingsError`."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        path = default_home() / "config.yaml"
        data: dict[str, Any] = {}
        loaded = read_config_document(path)
        if loaded:
            check_known_keys(path, loaded, settings_cls.model_fields)
            secrets_ = {"secret_key", "approver_token", "session_token", "child_session_token",
                        "mcp_servers"}  # fmt: skip
            if path.stat().st_mode & 0o077 and (secrets_ & loaded.keys()):
                log.warning("%s holds secrets but other users may read it: chmod 600 it", path)
            data = _split_document(loaded, settings_cls.model_fields)
        super().__init__(settings_cls, data)


def _split_document(loaded: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """config.yaml's settings; other top-level mappings are backends' settings."""
    data = {k: v for k, v in loaded.items() if k in fields}
    backends: dict[str, Any] = {}
    if isinstance(data.get("backends"), dict):
        backends.update(data["backends"])
    for key, value in loaded.items():
        if key not in fields and isinstance(value, dict):
            backends[key] = value
    data["backends"] = backends
    return data


def _env_backend_vars() -> dict[str, str]:
    """``SBX_*`` variables that name no setting: candidates for ``SBX_<BACKEND>_<KEY>``."""
    own = {f"SBX_{name.upper()}" for name in Settings.model_fields}
    return {k: v for k, v in os.environ.items() if k.startswith("SBX_") and k not in own}


class McpServerSettings(BaseModel):
    """One ``mcp_servers`` entry of config.yaml: a stdio MCP server whose tools the worker serves.

    ``env`` values are secrets: kept as ``SecretStr`` (masked in reprs and in
    validation errors) and given only to the server process, which inherits
    nothing else of the worker's environment but a credential-free baseline
    (``registry.mcp_connections.BASELINE_ENV_VARS``: ``PATH``, ``HOME``, user, locale).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    """Display name (wire-name slug, ``tool_search`` label); defaults to the server id."""
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], SecretStr] = (
        Field(default_factory=dict)
    )
    enabled: bool = True
    force_prompt_tools: tuple[str, ...] = ()
    """Tools that always ask for approval and are never deferred."""
    timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds for start-up + handshake and for each request."""


def env_value_for(value: str) -> Any:
    """A variable's text, or the JSON it holds for structured keys (``[...]``, ``{...}``)."""
    stripped = value.strip()
    if stripped[:1] in ("[", "{"):
        with contextlib.suppress(ValueError):
            return json.loads(stripped)
    return value


class _Hidden:
    """Stands in for a rejected input so that a validation error cannot print a secret."""

    def __init__(self, value: object) -> None:
        self.what = type(value).__name__

    def __repr__(self) -> str:
        return f"<{self.what}, hidden>"


def _env_value(value: Any) -> Any:
    if isinstance(value, bool):  # YAML ``true`` means the string a shell would see
        return SecretStr(str(value).lower())
    return SecretStr(str(value)) if isinstance(value, str | int | float) else _Hidden(value)


def _hide_mcp_secrets(value: Any) -> Any:
    """Mask ``env`` values before validation: pydantic errors echo the input they reject."""
    if value is None:  # ``mcp_servers:`` with nothing under it
        return {}
    if not isinstance(value, dict):
        return _Hidden(value)
    out: dict[Any, Any] = {}
    for sid, entry in value.items():
        if isinstance(entry, McpServerSettings):  # built in code: already validated
            out[sid] = entry
            continue
        if not isinstance(entry, dict):
            out[sid] = _Hidden(entry)
            continue
        env = entry.get("env")
        if isinstance(env, dict):
            env = {k: _env_value(v) for k, v in env.items()}
        elif env is not None:
            env = _Hidden(env)
        out[sid] = {**entry, "env": env} if "env" in entry else entry
    return out


def _name_list(value: Any) -> Any:
    """``NAME,NAME`` (a variable) or a YAML list, as a tuple of names."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


NameList = Annotated[
    tuple[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...],
    NoDecode,
    BeforeValidator(_name_list),
]
"""Names given as ``A,B`` in a variable or as a list in config.yaml."""


McpServers = Annotated[
    dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")], McpServerSettings],
    BeforeValidator(_hide_mcp_secrets),
]


class Settings(BaseSettings):
    """Deployment settings of sbx; docs/configuration.md lists the public ones."""

    model_config = SettingsConfigDict(env_prefix="SBX_", extra="ignore", frozen=True)

    home: Path = Field(default_factory=default_home)
    broker_url: str | None = None
    """External Celery broker (Redis or AMQP); unset means the embedded Redis under ``home``."""
    ledger_url: str | None = None
    """Redis for sbx's own state (claims, heartbeats, result mailboxes, process routes,
    approvals); unset means the broker when it is Redis, else the embedded Redis under
    ``home`` (workers and clients on other machines must then share one via this URL)."""
    secret_key: SecretStr | None = None
    """One signing key (it signs; keys under ``home/keys`` still verify)."""
    backend: str = "local"
    allowed_backends: NameList | None = None
    """Backends this worker serves (``SBX_ALLOWED_BACKENDS=local,docker``); a call naming
    another is ``denied`` before anything is created. Unset: ``backend`` alone."""
    forward_env: NameList = ()
    """Worker variables passed into sandboxes (``SBX_FORWARD_ENV=NAME,...``); nothing else
    of the worker's environment but a credential-free baseline reaches any sandbox."""
    session_id: str | None = None
    session_token: SecretStr | None = None
    child_session_token: SecretStr | None = None
    """The child session's token for ``sbx session continue`` (its consent)."""
    approver_token: SecretStr | None = None
    """The platform's approver credential (``sbxa1.``): approving needs it."""
    token_ttl: float = Field(default=8 * 3600.0, gt=0)
    """Seconds a minted session token is valid unless ``--ttl`` says otherwise."""
    accept_v1_tokens: bool = True
    """Whether ``sbx1.`` tokens (no expiry, no key id) still verify."""

    queue: str = "sbx"
    concurrency: int = Field(default=8, ge=1, le=256)
    """Celery threads taking calls in (each only verifies, claims and queues a call)."""
    max_running: int = Field(default=64, ge=1, le=4096)
    """Calls running at once in a worker (each session's calls run one at a time)."""
    session_max_in_flight: int = Field(default=16, ge=1, le=10_000)
    """Calls one session may have running or queued in a worker; more get ``busy``."""
    default_timeout: int = Field(default=180, ge=1)
    max_timeout: int = Field(default=3600, ge=1, le=7 * 86_400)
    """The most seconds any call may ask for; a larger timeout is refused."""
    log_format: Literal["text", "json"] = "text"
    """The worker's log lines: Celery's text, or one JSON object a line (``sbx worker --json``)."""
    output_limit: int = Field(default=100_000, ge=1024)
    redact_output: bool = True
    heartbeat_interval: float = Field(default=1.0, gt=0)
    lost_after: float = Field(default=10.0, gt=0)
    """A running call whose worker sent no heartbeat for this long is ``lost``."""
    max_command_bytes: int = Field(default=64 * 1024, ge=1024)
    """The longest command (UTF-8 bytes) a call may carry; longer ones are refused unread."""
    max_call_bytes: int = Field(default=1 << 20, ge=4096)
    """The most bytes of arguments a call sent as raw text may carry."""
    max_file_bytes: int = Field(default=64 << 20, ge=1024)
    """The largest file an upload, a download, ``read_file`` or ``write_file`` moves."""
    lease_retention: int = Field(default=7 * 86_400, ge=60)
    """Seconds a session's lease and recorded state outlive its last call."""
    shutdown_grace: float = Field(default=30.0, ge=0)
    """On SIGTERM, running calls get this long to finish; then they are cancelled."""
    result_ttl: int = Field(default=3600, ge=1)
    """Seconds a delivered result can be collected again with its call id."""
    claim_ttl: int = Field(default=86_400, ge=60)
    """How long a call id stays claimed: a redelivery within this window never runs again."""
    shell_idle_ttl: float = Field(default=300.0, gt=0)
    """A session idle this long has its shell ended (its cwd and variables are kept and
    replayed by its next call): an idle session costs memory, not a process."""
    sandbox_idle_ttl: float = Field(default=3600.0, gt=0)
    """A session's sandbox idle this long is closed (unless it holds running processes)."""
    receipt_max_age_days: float = Field(default=7.0, gt=0)
    """Receipts older than this (by completion time) are pruned."""
    receipt_max_count: int = Field(default=1000, ge=1)
    """At most this many receipts are kept; the oldest completions go first."""
    process_output_cap: int = Field(default=64 * 1024 * 1024, ge=0)
    """Bytes of each background process's output kept on disk, the newest (0: unlimited;
    else at least 262144). See docs/processes.md for backends that cannot enforce it."""
    orphan_max_idle: float = Field(default=6 * 3600.0, gt=0)
    """Sandboxes of dead workers (containers, ...) idle this long are removed."""
    orphan_sweep_interval: float = Field(default=300.0, gt=0)
    """How often a worker looks for such sandboxes."""
    metrics_addr: str | None = None
    """``host:port`` of the Prometheus endpoint (``:port`` or ``port``: loopback); unset: off."""
    events: bool = False
    """Send Celery task events (Flower, celery-exporter); ``sbx worker --events`` too."""
    health_timeout: float = Field(default=5.0, gt=0, le=300)
    """Seconds ``sbx health`` waits for the worker's consumer to answer."""
    approval_mode: Literal["manual", "smart", "off"] | None = None
    """Overrides ``approvals.mode`` of config.yaml; ``off`` still refuses hardline commands."""
    embedded_redis_server: str | None = None
    """Path of the redis-server binary for the embedded broker; found automatically when unset."""
    mcp_servers: McpServers = Field(default_factory=dict)
    """MCP servers by id (1-64 of ``[A-Za-z0-9_-]``); see docs/architecture.md, "MCP tools"."""
    mcp_reload_interval: float = Field(default=1.0, ge=0)
    """Seconds between looks at config.yaml for MCP server changes (0: only on SIGHUP)."""
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Backends' settings from config.yaml by backend name (``worker.service.backends``)."""
    approvals: dict[str, Any] = Field(default_factory=dict)
    """The approval policy (config.yaml ``approvals:``; see docs/approvals.md)."""
    command_allowlist: list[str] = Field(default_factory=list)
    command_denylist: list[str] = Field(default_factory=list)
    plugins: dict[str, Any] = Field(default_factory=dict)
    """Tool plugins: ``entries.<id>.enabled``/``allow_tool_override``, ``repair`` (the
    plugin whose argument repair is used); see ``registry.plugins``."""
    backend_env: dict[str, str] = Field(default_factory=_env_backend_vars, exclude=True, repr=False)
    """``SBX_<BACKEND>_<KEY>`` variables as read at start (values may be secrets)."""

    @field_validator("process_output_cap", mode="after")
    @classmethod
    def _check_output_cap(cls, value: int) -> int:
        from process_registry.output_cap import validate_cap

        return validate_cap(value)

    @field_validator("broker_url", mode="after")
    @classmethod
    def _check_broker_url(cls, value: str | None) -> str | None:
        from worker.broker.urls import check_broker_url

        if value:
            check_broker_url(value)
        return value

    @field_validator("metrics_addr", mode="after")
    @classmethod
    def _check_metrics_addr(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return format_address(*parse_address(value))

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _YamlFileSource(settings_cls)

    def approval_document(self) -> dict[str, Any]:
        """The approval policy as config.yaml spells it (``approvals`` and the two lists)."""
        return {
            "approvals": dict(self.approvals),
            "command_allowlist": list(self.command_allowlist),
            "command_denylist": list(self.command_denylist),
        }

    @property
    def secret_path(self) -> Path:
        """Where the generated secret key lives when ``SBX_SECRET_KEY`` is unset."""
        return self.home / "secret.key"


LOOPBACK = "127.0.0.1"


def parse_address(value: str) -> tuple[str, int]:
    """``(host, port)`` of ``host:port``, ``[v6]:port``, ``:port`` or ``port`` (host
    loopback when omitted). Raises ``ValueError`` for anything else."""
    text = value.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port with a port from 1 to 65535, got {value!r}")
    return host or LOOPBACK, int(port)


def format_address(host: str, port: int) -> str:
    """``host:port`` (IPv6 hosts in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@cache
def get_settings() -> Settings:
    """The process's settings, read on first use and never again.

    Raises :class:`SettingsError` naming each bad key and what is wrong with it.
    """
    try:
        return Settings()
    except SettingsSourceError as exc:  # e.g. malformed JSON in SBX_MCP_SERVERS
        raise SettingsError(f"invalid configuration (config.yaml or SBX_*): {exc}") from None
    except ValidationError as exc:
        raise SettingsError(
            f"invalid configuration (config.yaml or SBX_*): {problems_of(exc)}"
        ) from None


def problems_of(exc: ValidationError) -> str:
    """Where each problem is and what is wrong, never the offending value (it may be secret)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
