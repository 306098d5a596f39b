"""The base of every backend's configuration model.

A backend's config is a pydantic model with a ``type`` literal naming the
backend, unknown keys refused and values frozen. The worker's one settings
object builds it from ``SBX_<BACKEND>_<KEY>`` variables and the ``backends:``
mapping of ``config.yaml`` and hands it to the backend; backends never read
the process environment for their settings. Secrets are ``SecretStr`` fields,
so :meth:`BackendConfig.public_view` (what ``sbx doctor`` shows) masks them.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, SecretStr


class WorkerContext(BaseModel):
    """What a worker tells every backend's config about itself (``BackendConfig.for_worker``)."""

    model_config = ConfigDict(frozen=True)

    state_dir: str
    """A private directory (0700, outside ``SBX_HOME``) for this backend's per-session state."""
    private_paths: tuple[str, ...] = ()
    """The worker's own files and directories (``SBX_HOME``, spool, sockets): no sandbox
    may see them."""
    forward_env: tuple[str, ...] = ()
    """Worker variables the operator forwards into sandboxes (``SBX_FORWARD_ENV``)."""


class BackendConfig(BaseModel):
    """Settings of one backend (subclasses add ``type: Literal[...]`` and their keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = ""

    def public_view(self) -> dict[str, Any]:
        """The effective values as JSON-ready data, secrets masked (``SecretStr`` fields,
        and the values of an ``env`` mapping: variables given to a sandbox often hold
        credentials)."""
        view: dict[str, Any] = _mask(self.model_dump(mode="python"))
        return view

    def for_worker(self, context: WorkerContext) -> Self:
        """This config completed with what the worker knows about itself; backends that
        keep state on the worker's host or pass its variables on override it. Default:
        unchanged."""
        return self


def _mask(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "**********" if value.get_secret_value() else ""
    if isinstance(value, dict):
        return {
            str(k): {str(n): "**********" for n in v} if k == "env" and isinstance(v, dict)
            else _mask(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


C = TypeVar("C", bound=BackendConfig)


def config_of(model: type[C], config: BackendConfig | None) -> C:
    """``config`` checked to be a ``model`` (``model()``, the defaults, when None).

    Raises ``TypeError`` for another backend's config.
    """
    if config is None:
        return model()
    if not isinstance(config, model):
        raise TypeError(f"expected a {model.__name__}, got a {type(config).__name__}")
    return config
