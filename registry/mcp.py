"""MCP server tools from a cache-only catalog, through the official ``mcp`` SDK.

Building a tool list never connects to an MCP server:

* :meth:`McpCatalog.list_tools` is cache-only. ``None`` in the cache means
  "never warmed"; ``[]`` means "warmed, no tools". The first read of a
  never-warmed server fires exactly one background :meth:`McpCatalog.refresh_tools`
  and returns ``[]`` (the server contributes tools from the next sync on), so a
  dead or slow server never blocks a session.
* :meth:`McpCatalog.refresh_tools` is the live path (list over the server's
  persistent session, write cache). A failed refresh keeps the last good
  snapshot. It is driven by background warmers: :meth:`prewarm`,
  :meth:`on_server_enabled`, :meth:`reconfigure`, :meth:`on_server_restarted` and
  :meth:`on_tool_list_changed`, which the session thread
  (:mod:`registry.mcp_connections`) calls when a server sends
  ``notifications/tools/list_changed``.

:func:`sync_mcp_tools_to_registry` (:mod:`registry.mcp_sync`) registers the cached
tools as entries whose handler proxies ``tools/call`` to the server. Ownership is ``namespace =
mcp:<server_id>`` (stable id, never the display name); ``namespace_label =
mcp:<server_name>`` is what ``tool_search`` shows. A cold or failed server keeps
its previous entries; a warm snapshot replaces them (stale ones are removed).
:func:`keep_registry_synced` re-runs the sync after every refresh that changed
a server's list, so a list-changed notification reaches the registry unaided.
A force-prompt tool is registered ``defer="never"`` and approval-gated.

Sharing across processes: with a ``store`` (:class:`~registry.mcp_cache.McpCacheStore`)
the catalog starts from the persisted last good snapshot of each configured server
(same configuration only) and persists every refresh outcome, so a worker serves
last session's tools at once and ``sbx tools`` / ``sbx doctor`` see what workers
saw. An ``offline`` catalog (the CLI's) is read-only: it never connects, never
refreshes and never writes; its calls fail with ``McpServerUnavailable``.

Wire names (:mod:`registry.mcp_names`): ``mcp__<server slug>__<tool slug>__<digest>``,
readable (Han romanised to pinyin), unique, stable and within 64 characters.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .mcp_cache import McpCacheStore
from .mcp_connections import (
    McpConnections,
    McpServerConfig,
    McpServerUnavailable,
    McpToolSpec,
)
from .mcp_names import MAX_TOOL_NAME, wire_name
from .mcp_sync import keep_registry_synced, sync_mcp_tools_to_registry, unregister_server

__all__ = [
    "MAX_TOOL_NAME",
    "McpCacheStore",
    "McpCatalog",
    "McpServerConfig",
    "McpServerUnavailable",
    "McpToolSpec",
    "keep_registry_synced",
    "sync_mcp_tools_to_registry",
    "unregister_server",
    "wire_name",
]

log = logging.getLogger(__name__)

Lister = Callable[[McpServerConfig], Awaitable[list[McpToolSpec]]]
Caller = Callable[[McpServerConfig, str, dict[str, Any]], Awaitable[Any]]


class McpCatalog:
    """Cache of each server's tool list; reads never connect (see module doc).

    Live traffic goes through one persistent session per server
    (:class:`~registry.mcp_connections.McpConnections`, a background thread and event loop
    owned by the catalog), unless test doubles are injected as ``lister`` / ``caller``.
    Tool *calls* use that session too, rather than a process per call: a stdio
    server is usually stateful (its tool list, open files, logins), so a call
    must reach the same process whose tools the catalog lists and whose
    ``tools/list_changed`` it hears; it also saves a process spawn and handshake
    per call. A dead process fails the call in flight with ``McpServerUnavailable``
    and the next call or refresh spawns a new one.

    Refreshes run on background threads, one per server at a time. A refresh
    requested while one is in flight for reasons that may postdate its listing
    (list-changed, restart, enable) is coalesced into exactly one more run; cold
    reads and :meth:`prewarm` just join the one in flight. After a refresh that
    changed the cached list, every :meth:`subscribe` listener is called with the
    server id (on the refresh thread). :meth:`close` stops connections and threads.

    ``store`` seeds the cache at construction and receives every refresh outcome,
    written *after* the listeners ran: once a process sees a tool in the file, the
    registry of the worker that wrote it already holds the tool. ``offline`` makes
    the catalog read-only (see module doc).
    """

    def __init__(
        self, servers: Iterable[McpServerConfig] = (), *,
        lister: Lister | None = None, caller: Caller | None = None,
        store: McpCacheStore | None = None, offline: bool = False,
    ) -> None:  # fmt: skip
        self.servers: dict[str, McpServerConfig] = {s.id: s for s in servers}
        self._cache: dict[str, list[McpToolSpec]] = {}
        self._errors: dict[str, str] = {}
        self._refreshed_at: dict[str, float] = {}
        self._store, self._offline = store, offline
        if store is not None:
            self._seed(store)
        self._inflight: dict[str, threading.Thread] = {}
        self._rerun: set[str] = set()  # a refresh was asked for while one was in flight
        self._reconnect: set[str] = set()  # drop the session before the next listing
        self._listeners: dict[object, Callable[[str], None]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._lister, self._caller = lister, caller
        # starts no thread until first used; the notification path re-enters the catalog
        self._connections = McpConnections(on_tools_changed=self.on_tool_list_changed)

    def _seed(self, store: McpCacheStore) -> None:
        """Start from the persisted snapshot of each configured server (same config only)."""
        for server in self.servers.values():
            entry = store.entry_for(server)
            if entry is None:
                continue
            if entry.tools is not None:
                self._cache[server.id] = entry.tools
            if entry.refreshed_at is not None:
                self._refreshed_at[server.id] = entry.refreshed_at
            if entry.error is not None:
                self._errors[server.id] = entry.error

    def list_tools(self, server_id: str) -> list[McpToolSpec] | None:
        """Cached tools; ``None`` when never warmed (and one background refresh is fired).

        An offline catalog fires nothing: never warmed stays ``None``.
        """
        with self._lock:
            cached = self._cache.get(server_id)
            cold = cached is None and server_id in self.servers and not self._offline
        if cold:
            self._refresh_in_background(server_id)
        return None if cached is None else list(cached)

    def last_error(self, server_id: str) -> str | None:
        """The message of the last failed refresh of ``server_id`` (cleared by a success)."""
        return self._errors.get(server_id)

    def status(self, server_id: str) -> dict[str, Any]:
        """What a status view shows of ``server_id``; never connects.

        ``cached_tools`` is the number of cached tools (``None``: never warmed),
        ``refreshed_at`` the time of the last successful refresh (epoch seconds),
        ``last_error`` that of the last failed one, if it failed since.
        """
        server = self.servers.get(server_id)
        with self._lock:
            cached = self._cache.get(server_id)
            refreshed_at = self._refreshed_at.get(server_id)
        return {
            "id": server_id,
            "name": server.name if server is not None else server_id,
            "enabled": server is not None and server.enabled,
            "cached_tools": None if cached is None else len(cached),
            "refreshed_at": refreshed_at,
            "last_error": self._errors.get(server_id),
        }

    def is_connected(self, server_id: str) -> bool:
        """Whether ``server_id`` has a live session now (for status views; never connects)."""
        return self._connections.is_connected(server_id)

    def refresh_tools(self, server_id: str) -> list[McpToolSpec] | None:
        """Live: list over the server's session, write the cache. On failure keep the last good.

        Blocks the calling thread (never call it from a tool-list build). A disabled
        server's session is stopped and its cache returned unchanged; an offline
        catalog returns its cache without connecting.
        """
        if self._offline:
            return self.list_tools(server_id)
        server = self.servers.get(server_id)
        with self._lock:
            reconnect = server_id in self._reconnect
            self._reconnect.discard(server_id)
        if server is None or not server.enabled or reconnect:
            self._connections.disconnect(server_id)
        if server is None or not server.enabled:
            return self._cache.get(server_id)
        try:
            if self._lister is None:
                tools = self._connections.list_tools(server)
            else:
                lister = self._lister

                async def live() -> list[McpToolSpec]:
                    return await lister(server)

                tools = asyncio.run(live())
        except Exception as exc:  # any failure keeps the last good snapshot
            error = f"{type(exc).__name__}: {exc}"
            self._errors[server_id] = error
            log.warning("MCP refresh of %s failed (%s); keeping last good tools", server_id, exc)
            if self._store is not None and not self._closed:  # a shutdown is not news
                self._store.record_failure(server, error)
            return self._cache.get(server_id)
        with self._lock:
            if self.servers.get(server_id) is not server:  # reconfigured or removed meanwhile
                gone = server_id not in self.servers
                stale = True
            else:
                gone = stale = False
        if stale:  # a reconfiguration asked for its own refresh; a removal ends the session
            if gone:
                self._connections.disconnect(server_id)
            return self._cache.get(server_id)
        with self._lock:
            changed = self._cache.get(server_id) != tools
            self._cache[server_id] = tools
            self._refreshed_at[server_id] = time.time()
            self._errors.pop(server_id, None)
            listeners = list(self._listeners.values()) if changed else []
        for listener in listeners:
            try:
                listener(server_id)
            except Exception:  # one bad listener must not starve the others
                log.exception("MCP catalog listener raised for %s", server_id)
        if self._store is not None:  # after the listeners: see the class doc
            self._store.record_success(server, tools)
        return list(tools)

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(server_id)`` after each refresh that changed the cached list.

        Returns an idempotent unsubscribe callable. See :func:`keep_registry_synced`.
        """
        token = object()
        with self._lock:
            self._listeners[token] = listener

        def unsubscribe() -> None:
            with self._lock:
                self._listeners.pop(token, None)

        return unsubscribe

    def _refresh_in_background(
        self, server_id: str, *, rerun: bool = False, reconnect: bool = False
    ) -> threading.Thread | None:
        with self._lock:
            if self._closed or self._offline:
                return None
            if reconnect:
                self._reconnect.add(server_id)
            running = self._inflight.get(server_id)
            if running is not None:  # one refresh at a time per server
                if rerun:  # its listing may predate the news: run once more after it
                    self._rerun.add(server_id)
                return running
            t = threading.Thread(target=self._refresh_loop, args=(server_id,), daemon=True,
                                 name=f"mcp-refresh-{server_id}")  # fmt: skip
            self._inflight[server_id] = t
        t.start()
        return t

    def _refresh_loop(self, server_id: str) -> None:
        again = True
        try:
            while again:
                self.refresh_tools(server_id)
                with self._lock:  # check and retire atomically, or a rerun request is lost
                    again = server_id in self._rerun and not self._closed
                    self._rerun.discard(server_id)
                    if not again:
                        self._inflight.pop(server_id, None)
        except BaseException:
            with self._lock:
                self._inflight.pop(server_id, None)
            raise

    def prewarm(self) -> list[threading.Thread]:
        """Refresh every enabled server in the background (at start-up)."""
        threads = [self._refresh_in_background(s.id) for s in self.servers.values() if s.enabled]
        return [t for t in threads if t is not None]

    def on_tool_list_changed(self, server_id: str) -> threading.Thread | None:
        """The server sent ``notifications/tools/list_changed``: refresh in the background.

        Called by the session thread when the notification arrives; never blocks.
        Several notifications during one refresh cost one more refresh, not one each.
        """
        return self._refresh_in_background(server_id, rerun=True)

    def on_server_enabled(self, server: McpServerConfig) -> threading.Thread | None:
        """A server was (re-)enabled or reconfigured: remember it and refresh.

        A changed config replaces the server's session (new process); a disabled
        one has its session stopped.
        """
        self.servers[server.id] = server
        return self._refresh_in_background(server.id, rerun=True)

    def reconfigure(self, server: McpServerConfig) -> threading.Thread | None:
        """Take a new configuration of ``server.id``: added, changed, enabled or disabled.

        A server that now runs another program (command, args or ``env`` names differ)
        starts from the snapshot of that configuration, never from the old program's
        tools; any change replaces its session (a new process) at the refresh this
        starts in the background, and a disabled server's session is stopped.
        """
        from .mcp_cache import config_fingerprint

        entry = self._store.entry_for(server) if self._store is not None else None
        with self._lock:
            old = self.servers.get(server.id)
            self.servers[server.id] = server
            if old is None or config_fingerprint(old) != config_fingerprint(server):
                for state in (self._cache, self._errors, self._refreshed_at):
                    state.pop(server.id, None)
                if entry is not None and entry.tools is not None:
                    self._cache[server.id] = entry.tools
                if entry is not None and entry.refreshed_at is not None:
                    self._refreshed_at[server.id] = entry.refreshed_at
        return self._refresh_in_background(server.id, rerun=True)

    def remove_server(self, server_id: str) -> None:
        """Forget ``server_id`` (it left the configuration): its cache, its session and
        process (stopped before this returns)."""
        with self._lock:
            self.servers.pop(server_id, None)
            for state in (self._cache, self._errors, self._refreshed_at):
                state.pop(server_id, None)
        self._connections.disconnect(server_id)

    def on_server_restarted(self, server_id: str) -> threading.Thread | None:
        """Restart a server: stop its session and process, reconnect and refresh."""
        return self._refresh_in_background(server_id, rerun=True, reconnect=True)

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Join in-flight refreshes, reruns included (tests and orderly shutdown)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                threads = list(self._inflight.values())
            if not threads or time.monotonic() >= deadline:
                return
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))

    async def call_tool(self, server_id: str, tool: str, args: dict[str, Any]) -> Any:
        """Proxy one call to the server (the execution path, not the catalog path).

        Raises ``McpServerUnavailable`` when the server is gone or does not answer
        within its ``timeout``.
        """
        server = self.servers.get(server_id)
        if server is None or not server.enabled:
            raise RuntimeError(f"MCP server {server_id!r} is not enabled")
        if self._offline:
            raise McpServerUnavailable("this MCP catalog is offline (read-only): call the worker")
        if self._caller is not None:
            return await self._caller(server, tool, args)
        return await self._connections.call_tool(server, tool, args)

    def close(self) -> None:
        """Stop every session and server process, then join the refresh threads. Final.

        Sessions go first so that a refresh blocked on a server fails fast instead of
        running out its timeout. Idempotent.
        """
        with self._lock:
            self._closed = True
        self._connections.close()
        self.wait_idle()

    def __enter__(self) -> McpCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
