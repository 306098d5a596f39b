"""Backend names to Environment classes, imported only when used.

Built-in backends are listed here by module path (one line each) so that a
user who installs only ``sbx[docker]`` never imports modal. Third-party
backends register an entry point in the ``sbx.environments`` group naming
their Environment class; they are treated exactly like the built-ins. Some
backends answer to a second name (``singularity`` is ``apptainer``): every
lookup goes through :func:`canonical_name`, so one backend has one name
inside sbx.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from environments.base import Environment
from environments.config import BackendConfig
from environments.errors import UnknownBackend

BUILTIN_BACKENDS: dict[str, str] = {
    "local": "environments.backends.local.environment:LocalEnvironment",
    "docker": "environments.backends.docker.environment:DockerEnvironment",
    "ssh": "environments.backends.ssh.environment:SSHEnvironment",
    "apptainer": "environments.backends.apptainer:ApptainerEnvironment",
    "modal": "environments.backends.modal.environment:ModalEnvironment",
    "daytona": "environments.backends.daytona.environment:DaytonaEnvironment",
    "vercel_sandbox": "environments.backends.vercel.environment:VercelEnvironment",
}

ALIASES: dict[str, str] = {"singularity": "apptainer"}
"""Other names a backend answers to (users' configs and calls may use either)."""

EXTRAS: dict[str, str] = {
    "docker": "docker",
    "ssh": "ssh",
    "modal": "modal",
    "daytona": "daytona",
    "vercel_sandbox": "vercel",
}
"""The ``sbx[...]`` extra that installs a built-in backend's SDK."""


@cache
def _targets() -> dict[str, str]:
    targets = dict(BUILTIN_BACKENDS)
    for ep in entry_points(group="sbx.environments"):
        targets.setdefault(ep.name, ep.value)
    return targets


def canonical_name(name: str) -> str:
    """The one name of the backend called ``name`` (aliases resolved)."""
    return ALIASES.get(name, name)


def backend_names(*, with_aliases: bool = False) -> list[str]:
    """Every backend name this installation knows, built-in or from plugins."""
    names = set(_targets())
    if with_aliases:
        names |= {alias for alias, name in ALIASES.items() if name in names}
    return sorted(names)


@cache
def backend_class(name: str) -> type[Environment]:
    """The Environment class registered as ``name`` (or an alias); imports its module on
    first use.

    Raises :class:`UnknownBackend` for a name nobody registered and
    ``ImportError`` when the backend's module or SDK is not installed.
    """
    target = _targets().get(canonical_name(name))
    if target is None:
        raise UnknownBackend(
            f"unknown backend {name!r}; known: {', '.join(backend_names(with_aliases=True))}"
        )
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise UnknownBackend(f"backend {name!r} does not name an Environment subclass")
    return cls


@cache
def backends_with_pty() -> list[str]:
    """Names of the installed backends that run commands on a pseudo-terminal
    (:attr:`Environment.supports_pty`). Imports every backend: for messages, not hot paths."""
    names = []
    for name in backend_names():
        try:
            if backend_class(name).supports_pty:
                names.append(name)
        except (UnknownBackend, ImportError):
            continue
    return names


def backend_availability(name: str, config: BackendConfig | None = None) -> tuple[bool, str]:
    """``(available, reason)`` for ``name`` without creating a sandbox.

    When the backend cannot be imported, the reason says which of these it is and
    what to do: the backend's own module is missing (reinstall sbx, or the plugin
    that registers it), its SDK is not installed (the ``sbx[...]`` extra that
    installs it), or its SDK is installed but does not import (upgrade it through
    that extra).
    """
    try:
        cls = backend_class(name)
    except UnknownBackend as exc:
        return False, str(exc)
    except ImportError as exc:
        return False, _import_problem(canonical_name(name), exc)
    try:
        return cls.availability(config)
    except Exception as exc:  # a probe must never take the doctor down
        return False, f"{type(exc).__name__}: {exc}"


def _import_problem(name: str, exc: ImportError) -> str:
    module_name = _targets()[name].partition(":")[0]
    missing = getattr(exc, "name", None) or ""
    builtin = name in BUILTIN_BACKENDS
    if missing and missing.partition(".")[0] == module_name.partition(".")[0]:
        # The backend's own code (its module or one beside it in its package) is absent.
        if builtin:
            return (
                f"this sbx build has no {name} backend (module {missing} is missing): "
                "reinstall sbx (pip install --force-reinstall sbx); no extra adds it"
            )
        return (
            f"the plugin that registers the {name} backend is incomplete (module {missing} "
            f"is missing): reinstall that plugin"
        )
    extra = EXTRAS.get(name)
    if isinstance(exc, ModuleNotFoundError):
        what = f"module {missing!r}" if missing else "a module"
        if extra:
            return (
                f"the {name} backend's SDK is not installed ({what} not found): "
                f"pip install 'sbx[{extra}]'"
            )
        source = "sbx" if builtin else "the plugin that registers it"
        return f"the {name} backend needs {what}, which is not installed: reinstall {source}"
    # The SDK is there but does not import: usually a version sbx was not built for.
    fix = f"pip install --upgrade 'sbx[{extra}]'" if extra else "reinstall its dependencies"
    return f"the {name} backend's SDK is installed but does not import ({exc}): {fix}"
