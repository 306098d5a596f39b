"""The ``asyncio`` client: :class:`AsyncSandboxClient`, the same calls as coroutines."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from worker.client.processes import AsyncProcessClientMixin
from worker.client.sync import SandboxClient
from worker.protocol.messages import ApprovalResult, FileInfo, TerminalResult, ToolDefinitions

if TYPE_CHECKING:
    from worker.settings import Settings


class AsyncSandboxClient(AsyncProcessClientMixin):
    """``asyncio`` face of :class:`SandboxClient`; the same arguments and results."""

    def __init__(
        self,
        broker_url: str | None = None,
        session_id: str | None = None,
        session_token: str | None = None,
        *,
        backend: str | None = None,
        settings: Settings | None = None,
        approver_token: str | None = None,
    ) -> None:
        self._sync = SandboxClient(
            broker_url, session_id, session_token, backend=backend, settings=settings,
            approver_token=approver_token,
        )  # fmt: skip
        self.session_id = self._sync.session_id

    async def tool_call(
        self, name: str, args: Any, *, wait: float | None = None, call_id: str | None = None
    ) -> str:
        """As :meth:`SandboxClient.tool_call` (``call_id`` names the call: a retry with the
        same id never runs it twice); cancelling the awaiting task cancels the call."""
        call_id = call_id or uuid.uuid4().hex
        try:
            return await asyncio.to_thread(
                self._sync.tool_call, name, args, wait=wait, call_id=call_id
            )
        except asyncio.CancelledError:
            await asyncio.to_thread(self._sync.cancel, call_id)
            raise

    async def result(self, call_id: str, wait: float) -> str:
        """As :meth:`SandboxClient.result`."""
        return await asyncio.to_thread(self._sync.result, call_id, wait)

    async def exec(
        self, command: str, *, workdir: str | None = None, timeout: int | None = None
    ) -> TerminalResult:
        return await asyncio.to_thread(self._sync.exec, command, workdir=workdir, timeout=timeout)

    async def exec_stream(
        self,
        command: str,
        *,
        workdir: str | None = None,
        timeout: int | None = None,
        call_id: str | None = None,
    ) -> AsyncIterator[str | TerminalResult]:
        """As :meth:`SandboxClient.exec_stream`, an async iterator: output pieces while the
        command runs, the :class:`TerminalResult` last. Cancelling the consuming task, or
        leaving the loop early, cancels the command."""
        call_id = call_id or uuid.uuid4().hex
        items = self._sync.exec_stream(command, workdir=workdir, timeout=timeout, call_id=call_id)
        finished = waiting = False
        try:
            while not finished:
                waiting = True
                item = await asyncio.to_thread(next, items, None)
                waiting = False
                if item is None:
                    return
                finished = isinstance(item, TerminalResult)
                yield item
        finally:
            if not finished and waiting:
                # A thread is still inside ``next``: ask the worker to stop the command;
                # its result then ends that wait.
                await asyncio.shield(asyncio.to_thread(self._sync.cancel, call_id))
            elif not finished:
                await asyncio.to_thread(items.close)  # cancels the call (exec_stream's contract)

    async def upload(self, path: str, data: bytes) -> FileInfo:
        """As :meth:`SandboxClient.upload`."""
        return await asyncio.to_thread(self._sync.upload, path, data)

    async def download(self, path: str) -> bytes:
        """As :meth:`SandboxClient.download`."""
        return await asyncio.to_thread(self._sync.download, path)

    async def tool_definitions(
        self,
        *,
        context_window: int | None = None,
        scope: dict[str, Any] | None = None,
        toolsets: list[str] | None = None,
    ) -> ToolDefinitions:
        """As :meth:`SandboxClient.tool_definitions`."""
        return await asyncio.to_thread(
            functools.partial(
                self._sync.tool_definitions,
                context_window=context_window, scope=scope, toolsets=toolsets,
            )
        )  # fmt: skip

    async def approve(
        self, approval_id: str, scope: Literal["once", "session", "always"] = "once"
    ) -> ApprovalResult:
        return await asyncio.to_thread(self._sync.approve, approval_id, scope)

    async def deny(self, approval_id: str) -> ApprovalResult:
        return await asyncio.to_thread(self._sync.deny, approval_id)

    async def ping(self, timeout: float = 10.0) -> bool:
        return await asyncio.to_thread(self._sync.ping, timeout)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
