"""Long-lived MCP client sessions, one per server, on a background event loop.

:class:`McpConnections` keeps one stdio connection (an official-SDK ``ClientSession``
over ``stdio_client``) open per MCP server, all on one daemon thread running its
own asyncio loop. Persistent sessions are what let the catalog *hear* a server:
``notifications/tools/list_changed`` only arrives on an open connection, so a
connect-per-request client never learns that a server's tools changed.

Contracts:

* Connections are lazy: the first :meth:`McpConnections.list_tools` or
  :meth:`McpConnections.call_tool` for a server spawns its process; later ones reuse it.
  A changed :class:`McpServerConfig` (same id) replaces the connection.
* A ``tools/list_changed`` notification calls ``on_tools_changed(server_id)`` on
  the session thread; the callback must not block (the catalog starts a thread).
* A server whose process exits (stdout EOF) is detected at once: the connection
  is torn down, a request in flight fails with :class:`McpServerUnavailable`
  (never a hang), and the next request spawns a new process. A call that had to
  reconnect also reports ``on_tools_changed``: a new process may list other tools.
* Every wait is bounded by ``McpServerConfig.timeout`` (connect + initialize,
  then each request), with a backstop on the caller's side.
* A server process gets only :func:`server_environment`: a secret-free baseline
  (``PATH``, ``HOME``, locale, ...) plus its configured ``env``, never the
  worker's environment (``SBX_SECRET_KEY``, broker credentials).
* :meth:`McpConnections.close` stops every connection (the SDK closes stdin, then
  terminates and reaps the process tree) and joins the thread. It is final.

The wire-level types (server settings, tool specs, errors) live in
:mod:`registry.mcp_types`, shared with the catalog.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:  # the SDK is optional: imported lazily where it is used
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp import ClientSession
    from mcp.client.session import IncomingMessage
    from mcp.shared._stream_protocols import ReadStream
    from mcp.shared.message import SessionMessage

from .mcp_types import (
    BASELINE_ENV_VARS,
    McpServerConfig,
    McpServerUnavailable,
    McpToolSpec,
    call_result,
    server_environment,
    server_stderr,
    stdio_params,
    tool_specs,
)

log = logging.getLogger(__name__)

__all__ = [
    "BASELINE_ENV_VARS",
    "McpConnections",
    "McpServerConfig",
    "McpServerUnavailable",
    "McpToolSpec",
    "server_environment",
]

_T = TypeVar("_T")
_STOP_TIMEOUT = 10.0  # the SDK's stdio shutdown is bounded at about 6.5 s (stdin, TERM, KILL)
_BACKSTOP_GRACE = 5.0  # caller-side margin over the in-loop timeouts
_MAX_PAGES = 100  # a server that never stops paginating must not loop forever


@dataclass(eq=False)
class _Connection:
    """One server's connection; touched only on the session loop."""

    server: McpServerConfig
    ready: asyncio.Future[ClientSession]
    wake: asyncio.Event  # set to end the connection: stop requested or the server went away
    stopping: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.wake.is_set()


class McpConnections:
    """Persistent stdio sessions to MCP servers (see module doc). Thread-safe."""

    def __init__(self, on_tools_changed: Callable[[str], object] | None = None) -> None:
        self._on_tools_changed = on_tools_changed
        self._conns: dict[str, _Connection] = {}  # loop thread only
        self._connected_before: set[str] = set()  # loop thread only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # --- caller side (any thread but the session thread) ---------------------------

    def list_tools(self, server: McpServerConfig) -> list[McpToolSpec]:
        """``tools/list`` (all pages) over the server's session; blocks the calling thread.

        Raises :class:`McpServerUnavailable` when the server cannot be reached in time,
        or the SDK's ``MCPError`` when the server answers with an error.
        """
        fut = self._submit(self._list(server))
        try:
            return fut.result(timeout=2 * server.timeout + _BACKSTOP_GRACE)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise McpServerUnavailable(f"MCP server {server.id!r}: tools/list timed out") from None

    async def call_tool(
        self, server: McpServerConfig, tool: str, args: dict[str, Any]
    ) -> dict[str, Any]:
        """``tools/call`` over the server's session, awaitable from any event loop.

        Cancelling the awaiting task cancels the request on the session loop.
        """
        fut = self._submit(self._call(server, tool, args))
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(fut), 2 * server.timeout + _BACKSTOP_GRACE
            )
        except TimeoutError:
            raise McpServerUnavailable(
                f"MCP server {server.id!r}: tools/call {tool!r} timed out"
            ) from None

    def is_connected(self, server_id: str) -> bool:
        """Whether ``server_id`` has a live, initialized session right now."""
        loop = self._loop
        if loop is None or self._closed:
            return False

        async def probe() -> bool:
            conn = self._conns.get(server_id)
            return conn is not None and conn.ready.done() and not conn.finished

        return self._submit(probe()).result(timeout=_STOP_TIMEOUT)

    def disconnect(self, server_id: str) -> None:
        """Stop ``server_id``'s session and process (blocks until reaped); next use reconnects."""
        with self._lock:
            if self._loop is None or self._closed:
                return  # nothing was ever started: do not start the thread to stop nothing
        self._submit(self._disconnect(server_id)).result(timeout=_STOP_TIMEOUT + _BACKSTOP_GRACE)

    def close(self, timeout: float = _STOP_TIMEOUT + _BACKSTOP_GRACE) -> None:
        """Stop every session and process, then the loop and its thread. Idempotent, final."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout)
        except Exception as exc:  # still stop the loop: a stuck stop must not leak the thread
            log.warning("MCP sessions did not all stop cleanly: %r", exc)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        with self._lock:
            if self._closed:
                coro.close()
                raise McpServerUnavailable("MCP sessions are closed")
            if threading.current_thread() is self._thread:
                coro.close()  # .result() here would wait on the loop it blocks
                raise RuntimeError("McpConnections must not be called from its own loop thread")
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._loop,), name="mcp-sessions", daemon=True
                )
                self._thread.start()
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            for task in asyncio.all_tasks(loop):  # only after a failed stop: do not leave them
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # --- session loop side ---------------------------------------------------------

    async def _list(self, server: McpServerConfig) -> list[McpToolSpec]:
        from mcp.types import PaginatedRequestParams

        session = await self._session(server, announce_reconnect=False)
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            listed = await self._request(server, "tools/list", session.list_tools(params=params))
            tools += listed.tools
            cursor = listed.next_cursor
            if cursor is None:
                break
        return tool_specs(tools)

    async def _call(self, server: McpServerConfig, tool: str, args: dict[str, Any]) -> Any:
        session = await self._session(server, announce_reconnect=True)
        res = await self._request(server, f"tools/call {tool!r}", session.call_tool(tool, args))
        return call_result(res)

    @staticmethod
    async def _request(server: McpServerConfig, what: str, request: Coroutine[Any, Any, _T]) -> _T:
        """Await one request; connection loss and timeouts become :class:`McpServerUnavailable`."""
        import anyio
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        try:
            return await request
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            # The connection ended between "ready" and sending: same as a close mid-request.
            raise McpServerUnavailable(
                f"MCP server {server.id!r} closed the connection before {what}; "
                "the next request reconnects"
            ) from exc
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise McpServerUnavailable(
                    f"MCP server {server.id!r} closed the connection during {what} "
                    "(process exited or was stopped); the next request reconnects"
                ) from exc
            if exc.code == REQUEST_TIMEOUT:
                raise McpServerUnavailable(
                    f"MCP server {server.id!r} did not answer {what} within {server.timeout}s"
                ) from exc
            raise  # the server's own error answer

    async def _session(self, server: McpServerConfig, *, announce_reconnect: bool) -> ClientSession:
        conn = self._conns.get(server.id)
        if conn is not None and conn.server != server:
            await self._stop(conn)  # reconfigured: the old process must not keep serving
            conn = None
        if conn is None or conn.finished:
            reconnect = server.id in self._connected_before
            conn = self._start(server)
            if reconnect and announce_reconnect:
                conn.ready.add_done_callback(lambda f: self._announce(server.id, f))
        # shielded: a caller giving up must not cancel the connect others may wait on
        return await asyncio.shield(conn.ready)

    def _start(self, server: McpServerConfig) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(server, loop.create_future(), asyncio.Event())
        # a failed connect nobody awaits any more must not log "exception never retrieved"
        conn.ready.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        conn.task = loop.create_task(self._run(conn), name=f"mcp-session-{server.id}")
        self._conns[server.id] = conn
        return conn

    def _announce(self, server_id: str, ready: asyncio.Future[Any]) -> None:
        if not ready.cancelled() and ready.exception() is None:
            self._tools_changed(server_id)

    def _tools_changed(self, server_id: str) -> None:
        if self._on_tools_changed is None:
            return
        try:
            self._on_tools_changed(server_id)
        except Exception:  # a broken listener must not take the session down
            log.exception("on_tools_changed(%r) raised", server_id)

    async def _run(self, conn: _Connection) -> None:
        """Own one connection for its whole life (anyio scopes must exit in their task)."""
        import anyio
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client
        from mcp.shared.message import SessionMessage
        from mcp.types import ToolListChangedNotification

        Relayed: TypeAlias = SessionMessage | Exception
        server = conn.server

        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, ToolListChangedNotification):
                if self._conns.get(server.id) is conn:  # a replaced connection is not news
                    self._tools_changed(server.id)
            elif isinstance(message, Exception):
                log.warning("MCP server %s sent an unreadable message: %r", server.id, message)

        try:
            async with stdio_client(stdio_params(server), server_stderr()) as (read, write):
                relay_in, relay_out = anyio.create_memory_object_stream[Relayed](0)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._relay, read, relay_in, conn)
                    try:
                        async with ClientSession(
                            relay_out, write, read_timeout_seconds=server.timeout,
                            message_handler=on_message,
                        ) as session:  # fmt: skip
                            with anyio.fail_after(server.timeout):
                                await session.initialize()
                            self._connected_before.add(server.id)
                            conn.ready.set_result(session)
                            await conn.wake.wait()
                    finally:
                        conn.stopping = True  # from here on, the relay ending is our doing
                        tg.cancel_scope.cancel()
        except Exception as exc:
            cause = _root(exc)
            if not conn.ready.done():
                why = f"{type(cause).__name__}: {cause}"
                conn.ready.set_exception(
                    McpServerUnavailable(f"MCP server {server.id!r} could not be started: {why}")
                )
            else:
                log.warning("MCP session %s ended with %r", server.id, cause)
        finally:
            conn.wake.set()
            if not conn.ready.done():
                conn.ready.set_exception(McpServerUnavailable(
                    f"MCP server {server.id!r} was stopped before it was ready"
                ))  # fmt: skip
            if self._conns.get(server.id) is conn:
                del self._conns[server.id]

    @staticmethod
    async def _relay(
        source: ReadStream[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
        conn: _Connection,
    ) -> None:
        """Forward the transport's messages to the session; EOF means the server is gone.

        The SDK exposes no "process exited" hook, so the end of the server's stdout
        is the signal: closing ``sink`` fails the requests in flight (CONNECTION_CLOSED)
        and setting ``wake`` tears the connection down (the SDK reaps the process).
        """
        import anyio

        try:
            async with sink:
                async for item in source:
                    await sink.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session side closed first: we are stopping
        finally:
            if not conn.stopping:
                log.warning("MCP server %s closed its connection (exited?)", conn.server.id)
            conn.wake.set()

    async def _stop(self, conn: _Connection) -> None:
        conn.stopping = True
        conn.wake.set()
        task = conn.task
        if task is None or task.done():
            return
        _, pending = await asyncio.wait({task}, timeout=_STOP_TIMEOUT)
        if pending:  # the SDK bounds its shutdown; this is only a last resort
            task.cancel()
            await asyncio.wait({task}, timeout=_STOP_TIMEOUT)

    async def _disconnect(self, server_id: str) -> None:
        conn = self._conns.get(server_id)
        if conn is not None:
            await self._stop(conn)

    async def _stop_all(self) -> None:
        conns = list(self._conns.values())
        await asyncio.gather(*(self._stop(c) for c in conns))


def _root(exc: BaseException) -> BaseException:
    """The single leaf of nested exception groups (anyio wraps task-group errors)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
