"""Each backend's validated config, from the one settings object.

``SBX_<BACKEND>_<KEY>`` variables win over the ``<backend>:`` (or
``backends: {<backend>: ...}``) mapping of config.yaml, which wins over the
backend's defaults; the backend's own config model validates the result.
Aliases (``singularity``) read the canonical backend's keys too.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from environments.config import BackendConfig
from environments.registry import ALIASES, backend_class, canonical_name
from worker.settings import Settings, SettingsError, env_value_for, problems_of


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
            config = self._cache[canonical] = backend_config(self.settings, canonical)
        return config
