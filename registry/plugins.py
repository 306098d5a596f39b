"""Tool plugins under the operator's settings: loaded once per process, by worker and CLI.

``config`` is the ``plugins`` mapping of the settings (config.yaml ``plugins:``,
``SBX_PLUGINS`` as JSON)::

    plugins:
      entries:
        <plugin id>:                   # the entry point's name in group sbx.tools
          enabled: false               # do not load it (default: loaded)
          allow_tool_override: true    # it may replace built-in tools (default: no)
      repair: <plugin id>              # use that plugin's argument-repair callback

Contracts: every installed plugin loads unless disabled; a plugin replaces a
built-in tool only with ``allow_tool_override: true``; its hooks run around every
tool call the process dispatches; a repair callback runs only when ``repair``
names its plugin (a repair changes what a tool runs with: the operator chooses).
A plugin that fails to load is logged and skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .core import RepairFn, ToolRegistry
from .core import registry as default_registry
from .discovery import discover_plugin_tools
from .hooks import HookRegistry
from .hooks import hooks as default_hooks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedPlugins:
    """What :func:`load_plugins` loaded."""

    ids: list[str] = field(default_factory=list)
    repair: RepairFn | None = None
    """The repair callback the operator chose (``plugins.repair``), if it was offered."""


def _disabled(config: Mapping[str, Any]) -> frozenset[str]:
    entries = config.get("entries")
    if not isinstance(entries, Mapping):
        return frozenset()
    return frozenset(
        str(pid) for pid, entry in entries.items()
        if isinstance(entry, Mapping) and entry.get("enabled") is False
    )  # fmt: skip


def load_plugins(
    config: Mapping[str, Any] | None,
    registry: ToolRegistry = default_registry,
    hooks: HookRegistry = default_hooks,
) -> LoadedPlugins:
    """Install ``config`` (the override opt-ins) into ``registry`` and load every enabled
    plugin of entry point group ``sbx.tools`` into it and ``hooks``."""
    config = config or {}
    registry.configure({"plugins": dict(config)})
    repairs: dict[str, RepairFn] = {}
    ids = discover_plugin_tools(registry, hooks=hooks, repairs=repairs, skip=_disabled(config))
    chosen = config.get("repair")
    repair = repairs.get(str(chosen)) if chosen else None
    if chosen and repair is None:
        log.warning("plugins.repair names %r, which offered no repair callback; "
                    "arguments are not repaired", chosen)  # fmt: skip
    if ids:
        log.info("tool plugins loaded: %s", ", ".join(ids))
    return LoadedPlugins(ids, repair)


_loaded: LoadedPlugins | None = None
_lock = threading.Lock()


def load_plugins_once(config: Mapping[str, Any] | None) -> LoadedPlugins:
    """:func:`load_plugins` into the process-wide registry and hooks, the first time only
    (a plugin's hooks must not be registered twice)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = load_plugins(config)
        return _loaded
