"""MCP server tools from a cache-only catalog (seed 001), through the official ``mcp`` SDK.

Building a tool list never connects to an MCP server:

* :meth:`McpCatalog.list_tools` is cache-only. ``None`` in the cache means
  "never warmed"; ``[]`` means "warmed, no tools". The first read of a
  never-warmed server fires exactly one background :meth:`McpCatalog.refresh_tools`
  and returns ``[]`` (the server contributes tools from the next sync on), so a
  dead or slow server never blocks a session.
* :meth:`McpCatalog.refresh_tools` is the live path (list over the server's
  persistent session, write cache). A failed refresh keeps the last good
  snapshot. It is driven by background warmers: :meth:`prewarm`,
  :meth:`on_server_enabled`, :meth:`on_server_restarted` and
  :meth:`on_tool_list_changed`, which the session thread
  (:mod:`registry.mcp_connections`) calls when a server sends
  ``notifications/tools/list_changed``.

:func:`sync_mcp_tools_to_registry` registers the cached tools as entries whose
handler proxies ``tools/call`` to the server. Ownership is ``namespace =
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

Wire names: ``mcp__<server slug>__<tool slug>__<digest>`` where the digest is 8
hex chars of sha256(server_id NUL tool_name) and slugs are ASCII-folded
``[a-z0-9_]`` (no ``__`` inside a segment), cut to keep the whole name within
64 characters, the providers' limit. Non-Latin names that do not fold (Han,
kana, Hangul) fall back to ``server`` / ``tool`` plus the digest.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .context import ToolContext
from .core import ToolRegistry
from .mcp_cache import McpCacheStore
from .mcp_connections import (
    McpConnections,
    McpServerConfig,
    McpServerUnavailable,
    McpToolSpec,
)

__all__ = [
    "MAX_TOOL_NAME",
    "McpCacheStore",
    "McpCatalog",
    "McpServerConfig",
    "McpServerUnavailable",
    "McpToolSpec",
    "keep_registry_synced",
    "sync_mcp_tools_to_registry",
    "wire_name",
]

log = logging.getLogger(__name__)

MAX_TOOL_NAME = 64
_DIGEST_LEN = 8


def _slug(text: str, fallback: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "_", folded.lower()).strip("_")
    return slug or fallback


def wire_name(server_id: str, server_name: str, tool_name: str) -> str:
    """The model-facing name of ``tool_name`` on server ``server_id`` (see module doc)."""
    digest = hashlib.sha256(f"{server_id}\0{tool_name}".encode()).hexdigest()[:_DIGEST_LEN]
    budget = MAX_TOOL_NAME - len("mcp______") - _DIGEST_LEN  # three "__" separators
    server, tool = _slug(server_name, "server"), _slug(tool_name, "tool")
    server = server[: max(8, budget // 3)].strip("_") or "server"
    tool = tool[: budget - len(server)].strip("_") or "tool"
    return f"mcp__{server}__{tool}__{digest}"


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


def sync_mcp_tools_to_registry(
    registry: ToolRegistry, catalog: McpCatalog, selected_ids: set[str] | None = None
) -> list[str]:
    """Register cached MCP tools (cache-only; never connects); returns the wire names.

    ``selected_ids`` limits to tool ids ``"<server_id>:<tool_name>"``; the scan stops
    once every selected id is claimed. Idempotent. Concurrent syncs (a request's
    and a list-changed one) are serialized: interleaved, one could unregister the
    tools the other just registered from a newer snapshot.
    """
    with _sync_lock:
        return _sync(registry, catalog, selected_ids)


def keep_registry_synced(
    registry: ToolRegistry, catalog: McpCatalog, selected_ids: set[str] | None = None
) -> Callable[[], None]:
    """Re-sync ``registry`` whenever a refresh changes a server's cached tools.

    This is how ``tools/list_changed`` (and a restart or re-enable) reaches the
    registered entries without anyone calling :func:`sync_mcp_tools_to_registry`.
    Returns the unsubscribe callable.
    """

    def on_change(server_id: str) -> None:
        sync_mcp_tools_to_registry(registry, catalog, selected_ids)

    return catalog.subscribe(on_change)


_sync_lock = threading.Lock()


def _sync(registry: ToolRegistry, catalog: McpCatalog, selected_ids: set[str] | None) -> list[str]:
    registered: list[str] = []
    claimed: set[str] = set()
    for server in sorted(catalog.servers.values(), key=lambda s: s.id):
        if selected_ids is not None and claimed >= selected_ids:
            break
        namespace = f"mcp:{server.id}"
        specs = catalog.list_tools(server.id) if server.enabled else []
        if specs is None:
            continue  # never warmed: keep whatever this server contributed before
        current: set[str] = set()
        for spec in specs:
            tool_id = f"{server.id}:{spec.name}"
            if selected_ids is not None and tool_id not in selected_ids:
                continue
            claimed.add(tool_id)
            name = wire_name(server.id, server.name, spec.name)
            forced = spec.name in server.force_prompt_tools
            schema: dict[str, Any] = {"parameters": spec.input_schema or {"type": "object"}}
            if spec.description:
                schema["description"] = spec.description
            entry = registry.register(
                name, f"mcp-{server.id}", schema, _proxy(catalog, server.id, spec.name),
                is_async=True, namespace=namespace, namespace_label=f"mcp:{server.name}",
                search_description=(spec.description.strip().splitlines() or [spec.name])[0],
                defer="never" if forced else "auto", approval_gated=forced,
                mcp_server_id=server.id, mcp_tool_name=spec.name,
            )  # fmt: skip
            if entry is not None:
                current.add(name)
                registered.append(name)
        if selected_ids is None:
            for e in registry.entries():  # a warm snapshot replaces the server's old entries
                if e.namespace == namespace and e.name not in current:
                    registry.unregister(e.name)
    return registered


_CANCEL_POLL_S = 0.1
"""How often a running MCP call looks at its caller's cancel event."""


def _proxy(catalog: McpCatalog, server_id: str, tool: str) -> Callable[..., Awaitable[Any]]:
    async def handler(args: Any, ctx: ToolContext) -> Any:
        # The call's own deadline and cancellation bound it, not only the server's timeout:
        # cancelling the task cancels the request on the session loop.
        call = asyncio.ensure_future(catalog.call_tool(server_id, tool, dict(args or {})))
        try:
            while not call.done():
                if ctx.cancel.is_set():
                    call.cancel()
                    return {"error": "cancelled by the caller", "status": "cancelled"}
                if ctx.remaining() <= 0:
                    call.cancel()
                    return {"error": f"MCP tool {tool!r} did not answer before the call's "
                                     "deadline", "status": "timeout"}  # fmt: skip
                await asyncio.wait({call}, timeout=min(_CANCEL_POLL_S, ctx.remaining()))
            return call.result()
        finally:
            call.cancel()  # no-op once done; stops it when this handler itself is cancelled

    handler.__name__ = f"mcp_{tool}"
    return handler
