"""The ``asyncio`` client: :class:`AsyncSandboxClient`, the same calls as coroutines."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Literal

from worker.client.processes import AsyncProcessClientMixin
from worker.client.sync import SandboxClient
from worker.protocol.messages import ApprovalResult, TerminalResult
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
    ) -> None:
        self._sync = SandboxClient(
            broker_url, session_id, session_token, backend=backend, settings=settings
        )
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
