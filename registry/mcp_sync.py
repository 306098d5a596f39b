"""MCP tools into a tool registry, from a catalog's cache (never connects).

:func:`sync_mcp_tools_to_registry` registers the cached tools as entries whose
handler proxies ``tools/call`` to the server (see :mod:`registry.mcp` for naming and
ownership); :func:`keep_registry_synced` re-runs it after every refresh that changed
a list; :func:`unregister_server` drops a server that left the configuration.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .context import ToolContext
from .core import ToolRegistry
from .mcp_names import wire_name
from .mcp_types import bounded_result

if TYPE_CHECKING:
    from .mcp import McpCatalog


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


def unregister_server(registry: ToolRegistry, server_id: str) -> list[str]:
    """Remove every entry of server ``server_id`` (namespace ``mcp:<id>``); their names."""
    with _sync_lock:
        gone = [e.name for e in registry.entries() if e.namespace == f"mcp:{server_id}"]
        for name in gone:
            registry.unregister(name)
    return gone


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
            result = call.result()
            # Bounded as a terminal's output is: a server may answer megabytes.
            return bounded_result(result, ctx.output_limit) if isinstance(result, dict) else result
        finally:
            call.cancel()  # no-op once done; stops it when this handler itself is cancelled

    handler.__name__ = f"mcp_{tool}"
    return handler
