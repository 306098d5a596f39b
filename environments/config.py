"""The base of every backend's configuration model.

A backend's config is a pydantic model with a ``type`` literal naming the
backend, unknown keys refused and values frozen. The worker's one settings
object builds it from ``SBX_<BACKEND>_<KEY>`` variables and the ``backends:``
mapping of ``config.yaml`` and hands it to the backend; backends never read
the process environment for their settings. Secrets are ``SecretStr`` fields,
so :meth:`BackendConfig.public_view` (what ``sbx doctor`` shows) masks them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr


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


FLEET_LABEL = "sbx.fleet"
"""The label naming the deployment a backend's sandbox belongs to."""

DEFAULT_FLEET = "default"


class FleetConfig(BackendConfig):
    """Settings of a backend whose sandboxes live in a store other deployments may share
    (a docker engine, a cloud organization): each sandbox carries its fleet's label, and
    the orphan sweep touches only its own fleet's sandboxes."""

    fleet: str = Field(default=DEFAULT_FLEET, pattern=r"^[A-Za-z0-9_.-]{1,63}$")
    """The deployment its sandboxes belong to (label ``sbx.fleet``): the orphan sweep
    removes only sandboxes of its own fleet, so deployments sharing an engine or an
    organization leave each other's sandboxes alone."""

    def fleet_labels(self) -> dict[str, str]:
        """The label every sandbox of this fleet carries, and the sweep's filter."""
        return {FLEET_LABEL: self.fleet}

    def shaping_hash(self, shaping: Iterable[str]) -> str:
        """12 hex digits hashing the values of the ``shaping`` fields, and the fleet's
        unless it is the default: two deployments' sessions of one id get two sandboxes,
        and the default fleet leaves the names sandboxes had before fleets existed."""
        fields = set(shaping) - {"fleet"}
        if self.fleet != DEFAULT_FLEET:
            fields.add("fleet")
        values = self.model_dump(include=fields)
        return hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()[:12]


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
