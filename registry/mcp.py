"""MCP server tools from a cache-only catalog (seed 001), through the official ``mcp`` SDK.

Building a tool list never connects to an MCP server:

* :meth:`McpCatalog.list_tools` is cache-only. ``None`` in the cache means
  "never warmed"; ``[]`` means "warmed, no tools". The first read of a
  never-warmed server fires exactly one background :meth:`McpCatalog.refresh_tools`
  and returns ``[]`` (the server contributes tools from the next sync on), so a
  dead or slow server never blocks a session.
* :meth:`McpCatalog.refresh_tools` is the live path (connect, list, write cache).
  A failed refresh keeps the last good snapshot. It is driven by background
  warmers: :meth:`prewarm`, :meth:`on_tool_list_changed`, :meth:`on_server_enabled`,
  :meth:`on_server_restarted`.

:func:`sync_mcp_tools_to_registry` registers the cached tools as entries whose
handler proxies ``tools/call`` to the server. Ownership is ``namespace =
mcp:<server_id>`` (stable id, never the display name); ``namespace_label =
mcp:<server_name>`` is what ``tool_search`` shows. A cold or failed server keeps
its previous entries; a warm snapshot replaces them (stale ones are removed).
A force-prompt tool is registered ``defer="never"`` and approval-gated.

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
import unicodedata
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .context import ToolContext
from .core import ToolRegistry

log = logging.getLogger(__name__)

MAX_TOOL_NAME = 64
_DIGEST_LEN = 8


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One configured MCP server (stdio transport)."""

    id: str
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    enabled: bool = True
    force_prompt_tools: frozenset[str] = frozenset()
    timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class McpToolSpec:
    """A tool as listed by a server."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


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


async def stdio_list_tools(server: McpServerConfig) -> list[McpToolSpec]:
    """Connect over stdio, list the tools, disconnect (the live path only)."""
    from mcp import ClientSession, StdioServerParameters  # lazy: the SDK is optional
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=server.command, args=list(server.args), env=server.env)
    async with (
        asyncio.timeout(server.timeout),
        stdio_client(params) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
    return [
        McpToolSpec(t.name, t.description or "", dict(getattr(t, "input_schema", {}) or {}))
        for t in listed.tools
    ]


async def stdio_call_tool(server: McpServerConfig, tool: str, args: dict[str, Any]) -> Any:
    """``tools/call`` over a fresh stdio connection; text content joined, errors flagged."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=server.command, args=list(server.args), env=server.env)
    async with (
        asyncio.timeout(server.timeout),
        stdio_client(params) as (r, w),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        res = await session.call_tool(tool, args)
    texts = [getattr(c, "text", "") for c in res.content if getattr(c, "type", "") == "text"]
    out: dict[str, Any] = {"content": "\n".join(texts)}
    structured = getattr(res, "structured_content", None)
    if structured is not None:
        out["structured"] = structured
    if getattr(res, "is_error", False):
        out["error"] = out["content"] or "MCP tool reported an error"
    return out


class McpCatalog:
    """Cache of each server's tool list; reads never connect (see module doc)."""

    def __init__(
        self, servers: Iterable[McpServerConfig] = (), *,
        lister: Lister = stdio_list_tools, caller: Caller = stdio_call_tool,
    ) -> None:  # fmt: skip
        self.servers: dict[str, McpServerConfig] = {s.id: s for s in servers}
        self._cache: dict[str, list[McpToolSpec]] = {}
        self._errors: dict[str, str] = {}
        self._inflight: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._lister, self._caller = lister, caller

    def list_tools(self, server_id: str) -> list[McpToolSpec] | None:
        """Cached tools; ``None`` when never warmed (and one background refresh is fired)."""
        with self._lock:
            cached = self._cache.get(server_id)
            cold = cached is None and server_id in self.servers
        if cold:
            self._refresh_in_background(server_id)
        return None if cached is None else list(cached)

    def last_error(self, server_id: str) -> str | None:
        """The message of the last failed refresh of ``server_id`` (cleared by a success)."""
        return self._errors.get(server_id)

    def refresh_tools(self, server_id: str) -> list[McpToolSpec] | None:
        """Live: connect, list, write the cache. On failure keep and return the last good list."""
        server = self.servers.get(server_id)
        if server is None or not server.enabled:
            return self._cache.get(server_id)
        lister = self._lister

        async def live() -> list[McpToolSpec]:
            return await lister(server)

        try:
            tools = asyncio.run(live())
        except Exception as exc:  # any failure keeps the last good snapshot
            self._errors[server_id] = f"{type(exc).__name__}: {exc}"
            log.warning("MCP refresh of %s failed (%s); keeping last good tools", server_id, exc)
            return self._cache.get(server_id)
        with self._lock:
            self._cache[server_id] = tools
            self._errors.pop(server_id, None)
        return list(tools)

    def _refresh_in_background(self, server_id: str) -> threading.Thread | None:
        with self._lock:
            running = self._inflight.get(server_id)
            if running is not None and running.is_alive():
                return running  # one refresh at a time per server
            t = threading.Thread(target=self.refresh_tools, args=(server_id,), daemon=True,
                                 name=f"mcp-refresh-{server_id}")  # fmt: skip
            self._inflight[server_id] = t
        t.start()
        return t

    def prewarm(self) -> list[threading.Thread]:
        """Refresh every enabled server in the background (at start-up)."""
        threads = [self._refresh_in_background(s.id) for s in self.servers.values() if s.enabled]
        return [t for t in threads if t is not None]

    def on_tool_list_changed(self, server_id: str) -> threading.Thread | None:
        """The server sent ``notifications/tools/list_changed``: refresh in the background."""
        return self._refresh_in_background(server_id)

    def on_server_enabled(self, server: McpServerConfig) -> threading.Thread | None:
        """A server was (re-)enabled or reconfigured: remember it and refresh."""
        self.servers[server.id] = server
        return self._refresh_in_background(server.id)

    def on_server_restarted(self, server_id: str) -> threading.Thread | None:
        """A server restarted: its tool list may have changed."""
        return self._refresh_in_background(server_id)

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Join in-flight refreshes (tests and orderly shutdown)."""
        for t in list(self._inflight.values()):
            t.join(timeout)

    async def call_tool(self, server_id: str, tool: str, args: dict[str, Any]) -> Any:
        """Proxy one call to the server (the execution path, not the catalog path)."""
        server = self.servers.get(server_id)
        if server is None or not server.enabled:
            raise RuntimeError(f"MCP server {server_id!r} is not enabled")
        return await self._caller(server, tool, args)


def sync_mcp_tools_to_registry(
    registry: ToolRegistry, catalog: McpCatalog, selected_ids: set[str] | None = None
) -> list[str]:
    """Register cached MCP tools (cache-only; never connects); returns the wire names.

    ``selected_ids`` limits to tool ids ``"<server_id>:<tool_name>"``; the scan stops
    once every selected id is claimed. Idempotent.
    """
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


def _proxy(catalog: McpCatalog, server_id: str, tool: str) -> Callable[..., Awaitable[Any]]:
    async def handler(args: Any, ctx: ToolContext) -> Any:
        return await catalog.call_tool(server_id, tool, dict(args or {}))

    handler.__name__ = f"mcp_{tool}"
    return handler
