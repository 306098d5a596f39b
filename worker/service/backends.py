"""Each backend's validated config, from the one settings object; which backends serve.

``SBX_<BACKEND>_<KEY>`` variables win over the ``<backend>:`` (or
``backends: {<backend>: ...}``) mapping of config.yaml, which wins over the
backend's defaults; the backend's own config model validates the result.
Aliases (``singularity``) read the canonical backend's keys too. A worker then
completes each config with what it knows about itself (:func:`worker_context`):
its private paths, which no sandbox may see, and ``SBX_FORWARD_ENV``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from environments.config import BackendConfig, WorkerContext
from environments.errors import Denied
from environments.registry import ALIASES, backend_class, backend_names, canonical_name
from process_registry.runtime_dir import runtime_dir
from worker.config_document import read_config_document, unknown_backend_sections
from worker.settings import Settings, SettingsError, default_home, env_value_for, problems_of


class BackendNotAllowed(Denied):
    """The call names a backend this worker does not serve (``SBX_ALLOWED_BACKENDS``)."""


def allowed_backends(settings: Settings) -> frozenset[str]:
    """The canonical names of the backends this worker serves."""
    return frozenset(canonical_name(b) for b in settings.allowed_backends or (settings.backend,))


def check_backend_allowed(settings: Settings, backend: str) -> None:
    """Raise :class:`BackendNotAllowed` unless ``backend`` (canonical) is served here."""
    if backend not in allowed_backends(settings):
        raise BackendNotAllowed(
            f"backend {backend!r} is not allowed on this worker (SBX_ALLOWED_BACKENDS); "
            "nothing was run"
        )


def check_backend_names(settings: Settings) -> None:
    """:class:`SettingsError` when ``SBX_BACKEND`` or a name in ``SBX_ALLOWED_BACKENDS``
    is no backend of this installation: a worker would start and look healthy, then
    fail every call that uses it."""
    known = backend_names(with_aliases=True)
    named = [("SBX_BACKEND", settings.backend)]
    named += [("SBX_ALLOWED_BACKENDS", name) for name in settings.allowed_backends or ()]
    for setting, name in named:
        if name not in known:
            raise SettingsError(
                f"{setting}: unknown backend {name!r}; known: {', '.join(backend_names())}"
            )
    # config.yaml's mappings that name no setting are backends' settings: a typo'd name
    # would leave that backend's defaults in force.
    path = default_home() / "config.yaml"
    loaded = read_config_document(path)
    sections = [
        k for k, v in loaded.items() if k not in Settings.model_fields and isinstance(v, dict)
    ]
    if isinstance(loaded.get("backends"), dict):
        sections += [str(k) for k in loaded["backends"]]
    unknown_backend_sections(path, sections, known)


def _socket_dirs(settings: Settings) -> list[str]:
    """Directories of the unix sockets of the broker and the ledger."""
    dirs = []
    for url in (settings.broker_url, settings.ledger_url):
        parsed = urlparse(url or "")
        if parsed.scheme in ("redis+socket", "socket", "unix") and parsed.path:
            dirs.append(str(Path(parsed.path).parent))
    return dirs


def worker_context(settings: Settings, backend: str) -> WorkerContext:
    """What this worker tells ``backend``'s config: a private state directory for it, the
    paths no sandbox may see (``SBX_HOME``, the runtime directory with the spool and
    sockets), and the variables the operator forwards."""
    runtime = runtime_dir(settings.home)
    return WorkerContext(
        state_dir=str(runtime / "sandboxes" / canonical_name(backend)),
        private_paths=(str(settings.home), str(runtime), *_socket_dirs(settings)),
        forward_env=settings.forward_env,
    )


def worker_backend_config(settings: Settings, name: str) -> BackendConfig:
    """:func:`backend_config` completed by :func:`worker_context`: what a worker's
    sandboxes of backend ``name`` are made with."""
    return backend_config(settings, name).for_worker(worker_context(settings, name))


def isolation_notice(settings: Settings) -> tuple[bool, str] | None:
    """For the worker's start log: ``(warn, text)`` about the local backend's isolation
    when this worker serves it (None otherwise)."""
    if "local" not in allowed_backends(settings):
        return None
    from environments.backends.local.config import NO_ISOLATION, LocalConfig

    config = worker_backend_config(settings, "local")
    if isinstance(config, LocalConfig) and config.isolation == "none":
        return True, f"local backend: SBX_LOCAL_ISOLATION=none: {NO_ISOLATION}"
    ok, why = backend_class("local").availability(config)
    if not ok:
        return True, f"local backend: {why}; local sessions are refused"
    return False, f"local backend: {why}"


def backend_config(settings: Settings, name: str) -> BackendConfig:
    """The validated config of backend ``name`` (or an alias of it).

    Raises :class:`~worker.settings.SettingsError` (one line, values hidden) for
    invalid values, and :class:`~environments.errors.UnknownBackend` or
    ``ImportError`` as :func:`~environments.registry.backend_class` does.
    """
    canonical = canonical_name(name)
    model = backend_class(canonical).config_model
    names = [canonical, *(alias for alias, target in ALIASES.items() if target == canonical)]
    data: dict[str, Any] = {}
    for n in names:
        data.update(settings.backends.get(n) or {})
    for n in names:
        prefix = f"SBX_{n.upper()}_"
        for key, value in settings.backend_env.items():
            if key.startswith(prefix):
                data[key[len(prefix) :].lower()] = env_value_for(value)
    data.pop("type", None)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(
            f"invalid settings for backend {canonical!r} (config.yaml or "
            f"SBX_{canonical.upper()}_*): {problems_of(exc)}"
        ) from None


class BackendConfigs:
    """``configs(backend)`` for a worker's pool: validated once per backend, then cached."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cache: dict[str, BackendConfig] = {}

    def __call__(self, name: str) -> BackendConfig:
        canonical = canonical_name(name)
        config = self._cache.get(canonical)
        if config is None:
            config = self._cache[canonical] = worker_backend_config(self.settings, canonical)
        return config
