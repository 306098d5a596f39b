"""The session shell's stdin and stdout, spoken to the task command router directly.

A session shell is one exec that lives as long as its session. Through the SDK's
own calls every command would cost a unary ``TaskExecStdinWrite`` (a new HTTP/2
stream and its answer) and, per output chunk, several async-generator and
connection-lease layers. Here:

* stdin is one client-streaming ``TaskExecStdinWriteStream`` (Start, one Data
  message per write, End for EOF), opened at the first write and kept open;
* stdout is one ``TaskExecStdioRead`` stream, read as it arrives.

Neither loses nor repeats a byte when its stream breaks. Output resumes through
the SDK's retrying reader from the last byte delivered. Input keeps the bytes
sent on the open stream; when that stream ends early (or, at the next write, has
carried :data:`RETAIN_LIMIT` bytes), the router is asked how much it applied
(``exec_stdin_status``, which also evicts the stream), the rest is re-sent with
the SDK's retrying ``exec_stdin_write``, and the next write opens a new stream.
A router without the streaming call (UNIMPLEMENTED) gets unary writes from then
on. Everything here runs on the SDK's event loop.

It reaches below the SDK's public API (the router client's stub, metadata and
connection lease): the SDK version is pinned, and the tests run these paths
against the fake router.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any

from grpclib import GRPCError, Status
from modal_proto import api_pb2
from modal_proto import task_command_router_pb2 as sr

RETAIN_LIMIT = 1 << 20
"""Bytes sent on one stdin stream before it is replaced: what a resume may have to re-send,
so what the stream keeps."""
_CLOSE_TIMEOUT = 5.0


async def read_stdout(router: Any, task_id: str, exec_id: str) -> AsyncGenerator[bytes, None]:
    """The exec's stdout as it arrives, to its end.

    Raises what the SDK's reader raises once the direct stream broke and the
    SDK's retries are spent too (``GRPCError`` such as NOT_FOUND for a finished
    task, ``ConnectionError``)."""
    delivered = 0
    try:
        async with router._lease():
            call = router._stub.TaskExecStdioRead.open(metadata=router._get_metadata())
            async with call as stream:
                request = sr.TaskExecStdioReadRequest(
                    task_id=task_id,
                    exec_id=exec_id,
                    offset=0,
                    file_descriptor=sr.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT,
                )
                await stream.send_message(request, end=True)
                async for item in stream:
                    data = bytes(item.data)
                    delivered += len(data)
                    yield data
        return
    except Exception:  # the SDK's reader below retries, refreshes the JWT, or raises
        pass
    chunks = router.exec_stdio_read(
        task_id, exec_id, api_pb2.FILE_DESCRIPTOR_STDOUT, start_offset=delivered
    )
    async for item in chunks:
        yield bytes(item.data)


class StdinStream:
    """Ordered writes to an exec's stdin over one long-lived stream; see the module docstring.

    Construct it and call :meth:`put` on the SDK's loop; a put never waits for the
    router. ``on_broken`` runs once, on that loop, when input can no longer reach
    the process (its stdin closed, the task gone, the router unreachable after the
    SDK's retries): what was put then may not all have arrived."""

    def __init__(
        self,
        router: Any,
        task_id: str,
        exec_id: str,
        on_broken: Callable[[], None],
    ) -> None:
        self._router = router
        self._task_id = task_id
        self._exec_id = exec_id
        self._on_broken = on_broken
        self._retain_limit = RETAIN_LIMIT  # read here, so tests can lower it
        self._written = 0  # bytes put so far: the stdin offset after them
        self._unary = False
        self._call: Any = None
        self._exit: contextlib.AsyncExitStack | None = None
        self._answer: asyncio.Future[Any] | None = None
        self._base = 0
        self._retained = bytearray()
        self._wake = asyncio.Event()
        self._outbox: list[bytes] = []
        self._eof = False
        self._task = asyncio.ensure_future(self._run())  # held: the loop keeps only weak refs

    # -- callers ---------------------------------------------------------------------------

    def put(self, data: bytes, *, eof: bool = False) -> None:
        """Queue ``data`` (then EOF when ``eof``) after what was queued before."""
        self._outbox.append(data)
        self._eof = self._eof or eof
        self._wake.set()

    # -- the writer task ---------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._answer is not None and self._answer.done():
                    await self._recover()  # the stream ended before our End
                data, eof = b"".join(self._outbox), self._eof
                self._outbox.clear()
                await self._send(data, eof)
                if eof:
                    return
        except Exception:
            await self._drop_call(cancel=True)
            self._on_broken()

    async def _send(self, data: bytes, eof: bool) -> None:
        if self._unary:
            await self._write_unary(self._written, data, eof)
            self._written += len(data)
            return
        if not data and not (eof and self._call is not None):
            if eof:
                await self._write_unary(self._written, b"", True)
            return
        if self._call is not None and len(self._retained) >= self._retain_limit:
            # Replaced between calls, when the router has applied what came before.
            await self._recover(failed=False)
        if self._call is None:
            self._base, self._retained = self._written, bytearray()
        self._retained += data
        self._written += len(data)
        try:
            if self._call is None:
                await self._open()
            if data:
                await self._call.send_message(sr.TaskExecStdinWriteStreamRequest(data=data))
            if eof:
                end = sr.TaskExecStdinWriteStreamRequest(end=sr.TaskExecStdinWriteStreamEnd())
                await self._call.send_message(end, end=True)
                assert self._answer is not None
                await asyncio.wait_for(asyncio.shield(self._answer), _CLOSE_TIMEOUT)
                await self._drop_call(cancel=False)
                return
        except Exception:
            await self._recover(eof=eof)

    async def _open(self) -> None:
        exit_stack = contextlib.AsyncExitStack()
        self._exit = exit_stack
        await exit_stack.enter_async_context(self._router._lease())
        call = self._router._stub.TaskExecStdinWriteStream.open(
            metadata=self._router._get_metadata()
        )
        await exit_stack.enter_async_context(call)
        self._call = call
        start = sr.TaskExecStdinWriteStreamStart(
            task_id=self._task_id, exec_id=self._exec_id, offset=self._base
        )
        await call.send_request()
        # Awaited from here on, so a refusal (UNIMPLEMENTED) is seen however early it comes.
        self._answer = asyncio.ensure_future(call.recv_message())
        self._answer.add_done_callback(lambda _: self._wake.set())
        await call.send_message(sr.TaskExecStdinWriteStreamRequest(start=start))

    async def _drop_call(self, *, cancel: bool) -> None:
        """Forget the open stream (resetting it when ``cancel``) and release its lease."""
        call, exit_stack, answer = self._call, self._exit, self._answer
        self._call = self._exit = self._answer = None
        if answer is not None:
            if not answer.done():
                answer.cancel()
            elif not answer.cancelled():
                answer.exception()  # retrieved here; the recovery decides what it meant
        if cancel and call is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(call.cancel(), _CLOSE_TIMEOUT)
        if exit_stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(exit_stack.aclose(), _CLOSE_TIMEOUT)

    async def _recover(self, *, eof: bool = False, failed: bool = True) -> None:
        """The open stream is gone or being replaced: re-send what it did not apply.

        Raises ``BrokenPipeError`` when the process's stdin no longer takes input,
        else what the SDK raises when its retries are spent."""
        answer = self._answer
        if failed and answer is not None:
            # The stream's answer says why it failed (an old router: UNIMPLEMENTED).
            await asyncio.wait({answer}, timeout=_CLOSE_TIMEOUT)
        failure = (
            answer.exception()
            if answer is not None and answer.done() and not answer.cancelled()
            else None
        )
        refused = _refused(self._call, failure)
        base, retained = self._base, bytes(self._retained)
        await self._drop_call(cancel=True)
        self._base, self._retained = self._written, bytearray()
        if refused:
            self._unary, applied = True, base  # the router has no streaming stdin
        else:
            status = await self._router.exec_stdin_status(self._task_id, self._exec_id)
            applied = status.num_bytes_written
            if status.closed:
                if applied < self._written:
                    raise BrokenPipeError("the process's stdin is closed")
                return
        if not base <= applied <= self._written:
            raise BrokenPipeError(f"the router applied {applied} bytes of stdin, not {base}-")
        rest = retained[applied - base :]
        if rest or eof:
            await self._write_unary(applied, rest, eof)

    async def _write_unary(self, offset: int, data: bytes, eof: bool) -> None:
        await self._router.exec_stdin_write(self._task_id, self._exec_id, offset, data, eof)


def _refused(call: Any, failure: BaseException | None) -> bool:
    """Whether the router answered the stream UNIMPLEMENTED (it lacks the method), also
    when the stream's reset (for input sent after that answer) overtook the error."""
    if isinstance(failure, GRPCError):
        return failure.status == Status.UNIMPLEMENTED
    stream = getattr(call, "_stream", None)  # grpclib's HTTP/2 stream: what was received
    for headers in (getattr(stream, "headers", None), getattr(stream, "trailers", None)):
        if headers and dict(headers).get("grpc-status") == str(Status.UNIMPLEMENTED.value):
            return True
    return False
