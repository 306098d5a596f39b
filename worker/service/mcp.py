"""MCP servers of the configuration, wired into the registry the worker dispatches through.

``Settings.mcp_servers`` (``$SBX_HOME/config.yaml``, key ``mcp_servers``) becomes an
:class:`~registry.mcp.McpCatalog` backed by the shared snapshot file
``$SBX_HOME/mcp-cache.json`` (:mod:`registry.mcp_cache`).

Contracts:

* :func:`start_mcp` never blocks on a server: it registers the persisted last good
  tools (cache-only), subscribes the registry to every later change
  (:func:`~registry.mcp.keep_registry_synced`) and starts the refreshes in the
  background (:meth:`~registry.mcp.McpCatalog.prewarm`). A server that is down
  only leaves its refresh error in the snapshot file and the log.
* :meth:`McpWiring.close` stops every server process; it is idempotent.
* :func:`open_offline_catalog` is the CLI's view: the same servers and snapshot,
  read-only, never connecting.
* No ``env`` value of a server is logged or written anywhere; the server process
  gets its ``env`` and a secret-free baseline only (:mod:`registry.mcp_connections`).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from registry.core import ToolRegistry
    from registry.mcp import McpCatalog, McpServerConfig
    from worker.settings import Settings

log = logging.getLogger(__name__)


def server_configs(settings: Settings) -> list[McpServerConfig]:
    """The configured servers as the catalog takes them (``env`` values revealed here only)."""
    from registry.mcp import McpServerConfig

    return [
        McpServerConfig(
            id=sid,
            name=entry.name or sid,
            command=entry.command,
            args=entry.args,
            env={k: v.get_secret_value() for k, v in entry.env.items()},
            enabled=entry.enabled,
            force_prompt_tools=frozenset(entry.force_prompt_tools),
            timeout=entry.timeout,
        )
        for sid, entry in sorted(settings.mcp_servers.items())
    ]


def _catalog(settings: Settings, *, offline: bool) -> McpCatalog:
    from registry.mcp import McpCatalog
    from registry.mcp_cache import CACHE_FILE, McpCacheStore

    store = McpCacheStore(settings.home / CACHE_FILE)
    return McpCatalog(server_configs(settings), store=store, offline=offline)


def open_offline_catalog(settings: Settings) -> McpCatalog:
    """A read-only catalog of the configured servers: persisted snapshots, no connections."""
    return _catalog(settings, offline=True)


@dataclass
class McpWiring:
    """The worker's live catalog and its registry subscription."""

    catalog: McpCatalog
    unsubscribe: Callable[[], None]
    _closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        """Stop following changes, then stop every session and server process. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.unsubscribe()
        self.catalog.close()


def start_mcp(settings: Settings, registry: ToolRegistry | None = None) -> McpWiring | None:
    """Serve the configured MCP servers' tools through ``registry`` (default: the worker's).

    ``None`` when no server is configured. Returns at once (see module doc).
    """
    if not settings.mcp_servers:
        return None
    from registry.core import registry as default_registry
    from registry.mcp import keep_registry_synced, sync_mcp_tools_to_registry

    target = default_registry if registry is None else registry
    if importlib.util.find_spec("mcp") is None:
        log.error("mcp_servers are configured but the mcp SDK is not installed: "
                  "pip install 'sbx[mcp]'; their tools are not served")  # fmt: skip
    catalog = _catalog(settings, offline=False)
    unsubscribe = keep_registry_synced(target, catalog)
    # subscribe first: a refresh finishing between the two steps is not missed
    names = sync_mcp_tools_to_registry(target, catalog)
    catalog.prewarm()
    enabled = [s.id for s in catalog.servers.values() if s.enabled]
    log.info("MCP servers %s: %d cached tool(s) registered, refreshing in the background",
             ",".join(enabled) or "(none enabled)", len(names))  # fmt: skip
    return McpWiring(catalog, unsubscribe)
