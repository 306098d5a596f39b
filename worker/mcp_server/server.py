"""The MCP server: ``tools/list`` and ``tools/call`` of the SDK's low-level ``Server``.

Contracts of a ``tools/call``:

* it acts as the connection's session (:data:`current_identity`, set per HTTP request,
  or the fixed stdio identity);
* the result is exactly the tool-result JSON the worker answered
  (:func:`~worker.mcp_server.tools.call_result`);
* while a foreground ``terminal`` call runs, a client that sent a progress token gets
  progress notifications: each piece of output as it comes (``message``), and a
  heartbeat every :data:`HEARTBEAT_S` seconds; ``progress`` is the seconds the call
  has run, ``total`` its timeout;
* a cancelled request (``notifications/cancelled``, or the HTTP response stream
  closed) cancels the call at the worker: its process tree is killed.
"""

from __future__ import annotations

import contextvars
import importlib.metadata
import math
import time
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from worker.errors import SbxError
from worker.integrations.session_calls import SessionCalls
from worker.mcp_server.identity import Identity
from worker.mcp_server.sessions import SessionClients
from worker.mcp_server.tools import ToolCatalog, call_result, failure_result, mcp_tools
from worker.settings import Settings

HEARTBEAT_S = 5.0
"""Seconds between progress notifications of a call that prints nothing."""

current_identity: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "sbx_mcp_identity", default=None
)
"""The session the current HTTP request names (set by ``worker.mcp_server.http``)."""

INSTRUCTIONS = (
    "sbx runs your shell commands in a sandbox. `terminal` runs one command; its working "
    "directory and exported variables persist between calls of this connection. Use "
    "`background: true` for servers and long jobs, then `process` to poll, read logs, "
    "wait or kill. Every result is a JSON object."
)


def _version() -> str:
    try:
        return importlib.metadata.version("sbx")
    except importlib.metadata.PackageNotFoundError:
        return "0"


class _Progress:
    """Progress notifications of one call: strictly increasing seconds, output as messages."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], total: float) -> None:
        self.ctx = ctx
        self.total = total
        self.started = time.monotonic()
        self.last = 0.0

    async def report(self, message: str) -> None:
        # Progress must grow with every notification, even two within one clock tick.
        self.last = max(self.last + 0.001, time.monotonic() - self.started)
        await self.ctx.session.report_progress(round(self.last, 3), self.total, message)

    async def heartbeat(self) -> None:
        while True:
            await anyio.sleep(HEARTBEAT_S)
            await self.report(f"running for {time.monotonic() - self.started:.0f}s")


def _foreground_terminal(name: str, args: Any) -> bool:
    return name == "terminal" and isinstance(args, dict) and not args.get("background")


def _progress_total(args: dict[str, Any], default: int) -> float:
    """The call's timeout as progress's ``total``: ``default`` unless ``args`` carry a
    positive number. A malformed timeout is the worker's to refuse, with a tool error
    the model reads, so it must not fail here first."""
    timeout = args.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        return float(default)
    return float(timeout) if math.isfinite(timeout) and timeout > 0 else float(default)


async def _terminal(
    ctx: ServerRequestContext[Any, Any], calls: SessionCalls, args: dict[str, Any], timeout: int
) -> str:
    progress = _Progress(ctx, _progress_total(args, timeout))
    async with anyio.create_task_group() as beats:
        beats.start_soon(progress.heartbeat)
        try:
            raw = await calls.terminal(args, on_output=progress.report)
        finally:
            beats.cancel_scope.cancel()
    return raw


def build_server(
    settings: Settings,
    clients: SessionClients,
    *,
    identity: Identity | None = None,
    toolsets: Sequence[str] | None = None,
) -> Server[Any]:
    """The SDK server of sbx's tools; ``identity`` fixes the session (stdio), else each
    request's :data:`current_identity` names it (HTTP)."""

    catalog = ToolCatalog(settings, toolsets)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        definitions = await anyio.to_thread.run_sync(catalog.definitions)
        return types.ListToolsResult(tools=mcp_tools(definitions))

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who = identity or current_identity.get()
        if who is None:
            return failure_result("this connection names no sbx session")
        args: dict[str, Any] = dict(params.arguments or {})
        try:
            async with clients.session(who) as calls:
                if _foreground_terminal(params.name, args):
                    raw = await _terminal(ctx, calls, args, settings.default_timeout)
                else:
                    raw = await calls.call(params.name, args)
        except SbxError as exc:  # no answer came back (broker down, no token): say why
            return failure_result(str(exc))
        return call_result(raw)

    return Server(
        "sbx",
        version=_version(),
        title="sbx sandbox",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=catalog.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(
    settings: Settings,
    identity: Identity,
    *,
    backend: str | None = None,
    toolsets: Sequence[str] | None = None,
) -> None:
    """Serve one MCP connection over this process's stdin/stdout as ``identity``; a
    line that is no JSON-RPC message is answered with its JSON-RPC error
    (:mod:`worker.mcp_server.malformed`)."""
    from mcp.server.stdio import stdio_server

    from worker.mcp_server.malformed import answering_malformed

    clients = SessionClients(settings, backend)
    server = build_server(settings, clients, identity=identity, toolsets=toolsets)
    try:
        async with (
            stdio_server() as (read_stream, write_stream),
            answering_malformed(read_stream, write_stream) as messages,
        ):
            await server.run(messages, write_stream, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):
            await clients.aclose()
