"""Backend lookup: names to Environment classes, imported only when used.

Built-in backends are listed here by module path so that a user who installs
only ``sbx[docker]`` never imports modal. Third-party backends register an
entry point in the ``sbx.environments`` group.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from .base import Environment
from .errors import UnknownBackend

BUILTIN_BACKENDS: dict[str, str] = {
    "local": "environments.local:LocalEnvironment",
    "docker": "environments.docker:DockerEnvironment",
    "ssh": "environments.ssh:SSHEnvironment",
    "singularity": "environments.apptainer:ApptainerEnvironment",
    "apptainer": "environments.apptainer:ApptainerEnvironment",
    "modal": "environments.modal:ModalEnvironment",
    "daytona": "environments.backends.daytona:DaytonaEnvironment",
    "vercel_sandbox": "environments.vercel:VercelEnvironment",
}


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN_BACKENDS)
    for ep in entry_points(group="sbx.environments"):
        targets.setdefault(ep.name, ep.value)
    return targets


def backend_names() -> list[str]:
    """Every backend name this installation knows, built-in or from plugins."""
    return sorted(_targets())


@cache
def backend_class(name: str) -> type[Environment]:
    """The Environment class registered as ``name``; imports its module on first use.

    Raises :class:`UnknownBackend` for a name nobody registered and
    ``ImportError`` when the backend's module or SDK is not installed.
    """
    target = _targets().get(name)
    if target is None:
        raise UnknownBackend(f"unknown backend {name!r}; known: {', '.join(backend_names())}")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise UnknownBackend(f"backend {name!r} does not name an Environment subclass")
    return cls


def backend_availability(name: str) -> tuple[bool, str]:
    """``(available, reason)`` for ``name`` without creating a sandbox."""
    try:
        cls = backend_class(name)
    except ImportError as exc:
        return False, f"not installed: {exc} (pip install 'sbx[{name}]')"
    except UnknownBackend as exc:
        return False, str(exc)
    try:
        return cls.availability()
    except Exception as exc:  # a probe must never take the doctor down
        return False, f"{type(exc).__name__}: {exc}"
