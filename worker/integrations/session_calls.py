"""A session's calls from ``async`` code (anyio: asyncio or trio), for the integrations.

:class:`SessionCalls` wraps one :class:`~worker.client.SandboxClient` and gives what the
MCP server and the inspect provider need of it:

* :meth:`~SessionCalls.call` -- one tool call; cancelling the awaiting task cancels the
  call at the worker (a queued call never runs, a running one has its tree killed);
* :meth:`~SessionCalls.terminal` -- a foreground ``terminal`` call whose output is handed
  to a sink as it comes;
* :meth:`~SessionCalls.upload` / :meth:`~SessionCalls.download` -- a file's bytes into
  or out of the session's sandbox.

This is the one place that knows how the client does files and streaming: files go
through the client's byte transfers (staged in and streamed out of the ledger, never
redacted, checked against their size and digest), and a foreground call's output comes
from the call's stream while it runs.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread

from worker.client import SandboxClient
from worker.errors import FileError

OutputSink = Callable[[str], Awaitable[None]]
"""Receives a foreground call's output, a piece at a time, while the call runs."""

FILE_TIMEOUT_S = 300
"""Seconds a command :meth:`SessionCalls.run` runs may take by default."""

DEFAULT_THREADS = 64
"""Calls one :class:`SessionCalls` waits for at once (each waits in a thread)."""


class SandboxCallError(OSError):
    """A command the integration needed did not run as it must (refused, failed, lost);
    the message says what the worker answered."""


class SessionCalls:
    """``async`` calls of the session ``client`` serves; closing is the client owner's job."""

    def __init__(self, client: SandboxClient, *, threads: int = DEFAULT_THREADS) -> None:
        self.client = client
        self._threads = threads
        self._limiter: anyio.CapacityLimiter | None = None

    @property
    def session_id(self) -> str:
        return self.client.session_id

    def _limit(self) -> anyio.CapacityLimiter:
        # Created on first use: a limiter belongs to the event loop that made it.
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._threads)
        return self._limiter

    async def call(self, name: str, args: Any, *, call_id: str | None = None) -> str:
        """Tool ``name`` with ``args``; the tool-result JSON exactly as the worker answered.

        If the awaiting task is cancelled, the call is cancelled at the worker before
        the cancellation propagates. Raises what :meth:`SandboxClient.tool_call` raises
        (:class:`~worker.errors.BrokerUnavailable`).
        """
        call_id = call_id or uuid.uuid4().hex
        send = functools.partial(self.client.tool_call, name, args, call_id=call_id)
        try:
            return await anyio.to_thread.run_sync(send, abandon_on_cancel=True,
                                                  limiter=self._limit())  # fmt: skip
        except anyio.get_cancelled_exc_class():
            # Shielded: inside a cancelled scope any other await would be cancelled too.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.client.cancel, call_id)
            raise

    async def terminal(self, args: dict[str, Any], on_output: OutputSink | None = None) -> str:
        """A foreground ``terminal`` call (``args`` as the tool takes them); its result JSON.

        ``on_output`` receives the command's (redacted) output while it runs; the result
        still carries it whole, bounded as always. Cancellation as in :meth:`call`.
        """
        if on_output is None:
            return await self.call("terminal", args)
        call_id = uuid.uuid4().hex
        stream = self.client.tool_stream("terminal", args, call_id=call_id)

        def step() -> bytes | _Result:
            try:
                return next(stream)
            except StopIteration as end:
                return _Result(end.value)

        try:
            while True:
                piece = await anyio.to_thread.run_sync(step, abandon_on_cancel=True,
                                                       limiter=self._limit())  # fmt: skip
                if isinstance(piece, _Result):
                    return piece.answer
                await on_output(piece.decode("utf-8", "replace"))
        except BaseException:
            # The stream may be mid-read in an abandoned thread: cancel the call itself
            # (that read then ends with the call's cancelled result). Shielded: inside a
            # cancelled scope any other await would be cancelled too.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.client.cancel, call_id)
            raise

    async def run(self, command: str, *, timeout: int = FILE_TIMEOUT_S) -> dict[str, Any]:
        """Run ``command`` in the session's shell; the parsed result, exit status 0 or raise.

        Raises :class:`SandboxCallError` when the command was refused, failed or did not
        come back, with what the worker said.
        """
        result = parse_result(await self.call("terminal", {"command": command, "timeout": timeout}))
        if result.get("exit_code") != 0:
            raise SandboxCallError(_why(result))
        return result

    async def upload(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the sandbox (created or replaced; relative paths
        are the session's cwd). Raises :class:`SandboxCallError` when it cannot."""
        try:
            await anyio.to_thread.run_sync(self.client.upload, path, data, limiter=self._limit())
        except FileError as exc:
            raise SandboxCallError(str(exc)) from None

    async def download(self, path: str) -> bytes:
        """The bytes of the file at ``path`` in the sandbox. Raises :class:`SandboxCallError`
        when it cannot be read, or when what came back is not exactly the file's bytes."""
        try:
            return await anyio.to_thread.run_sync(self.client.download, path,
                                                  limiter=self._limit())  # fmt: skip
        except FileError as exc:
            raise SandboxCallError(str(exc)) from None


class _Result:
    """The end of a streamed call: its result JSON."""

    def __init__(self, answer: str) -> None:
        self.answer = answer


def parse_result(raw: str) -> dict[str, Any]:
    """A tool result JSON object as a dict; :class:`SandboxCallError` if it is not one."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise SandboxCallError(f"the worker answered no JSON: {raw[:200]}") from None
    if not isinstance(value, dict):
        raise SandboxCallError(f"the worker answered something unexpected: {raw[:200]}")
    return value


def _why(result: dict[str, Any]) -> str:
    """One line saying why a command did not succeed."""
    status = result.get("status")
    if status in ("approval_required", "blocked"):
        return f"{status}: {result.get('description') or result.get('error') or ''}".strip()
    reason = result.get("error") or (result.get("output") or "").strip()[-500:]
    return f"exit status {result.get('exit_code')}: {reason}" if reason else str(result)
