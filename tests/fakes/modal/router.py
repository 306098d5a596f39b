"""The fake task command router: the exec RPCs the pinned SDK sends for ``Sandbox.exec``.

``TaskExecStart`` runs the command for real in the sandbox's jail;
``TaskExecStdioRead`` streams its stdout or stderr from a byte offset until
the stream ends; ``TaskExecStdinWrite`` feeds stdin at an offset (replays are
skipped, EOF closes it), and so does ``TaskExecStdinWriteStream``, one message
at a time (Start, Data..., End), until ``TaskExecStdinStatus`` or a newer
stream evicts it; ``TaskExecWait``/``TaskExecPoll`` report the exit as
a code or a signal. Each call checks the sandbox's JWT. A task whose sandbox
has finished is NOT_FOUND; input to a process that no longer takes it is
FAILED_PRECONDITION, as Modal's worker answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from grpclib import GRPCError, Status
from grpclib.server import Stream
from modal_proto import task_command_router_grpc
from modal_proto import task_command_router_pb2 as sr

from .jail import Exec
from .service import FakeModal, FakeSandbox, unimplemented_rest


@unimplemented_rest
class Router(task_command_router_grpc.TaskCommandRouterBase):
    def __init__(self, service: FakeModal) -> None:
        self.service = service

    async def _request(self, stream: Stream[Any, Any], method: str) -> tuple[Any, FakeSandbox]:
        request = await stream.recv_message()
        assert request is not None
        self.service.record(method, request)
        return request, self.service.check_router(stream, request.task_id)

    @staticmethod
    def _exec(sandbox: FakeSandbox, exec_id: str) -> Exec:
        run = sandbox.jail.execs.get(exec_id)
        if run is None:
            raise GRPCError(Status.NOT_FOUND, f"exec {exec_id} not found")
        return run

    async def TaskExecStart(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecStart")
        if req.HasField("pty_info"):
            raise GRPCError(Status.UNIMPLEMENTED, "the fake Modal runs no exec on a pty")
        if req.exec_id not in sandbox.jail.execs:
            env = dict(req.env)
            for source in req.secret_sources:
                env.update(source.env.contents)
            await sandbox.jail.exec(
                req.exec_id,
                list(req.command_args),
                workdir=req.workdir,
                env=env,
                stdout=req.stdout_config == sr.TASK_EXEC_STDOUT_CONFIG_PIPE,
                stderr=req.stderr_config == sr.TASK_EXEC_STDERR_CONFIG_PIPE,
                timeout=req.timeout_secs,
            )
        await stream.send_message(sr.TaskExecStartResponse())

    async def TaskExecStdioRead(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecStdioRead")
        run = self._exec(sandbox, req.exec_id)
        stdout = req.file_descriptor == sr.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT
        output = run.stdout if stdout else run.stderr
        offset = req.offset
        with _breakable("the output stream was cut", run.stdout_readers):
            while (chunks := await output.chunks_from(offset)) is not None:
                for chunk in chunks:
                    await stream.send_message(sr.TaskExecStdioReadResponse(data=chunk))
                    offset += len(chunk)

    async def TaskExecStdinWriteStream(self, stream: Stream[Any, Any]) -> None:
        if not self.service.stdin_streams:  # refused before any message, as for a method
            self.service.record("TaskExecStdinWriteStream", None)  # the server lacks
            raise GRPCError(Status.UNIMPLEMENTED, "Method not found!")
        first = await stream.recv_message()
        self.service.record("TaskExecStdinWriteStream", first)
        if first is None or not first.HasField("start"):
            raise GRPCError(Status.INVALID_ARGUMENT, "the first message must be a start")
        sandbox = self.service.check_router(stream, first.start.task_id)
        run = self._exec(sandbox, first.start.exec_id)
        if run.stdin_stream is not None:
            cut(run.stdin_stream)
        run.stdin_stream = owner = asyncio.current_task()
        offset = first.start.offset
        try:
            with _breakable("the stdin stream was evicted"):
                async for message in stream:
                    self.service.record("TaskExecStdinWriteStream", message)
                    if message.HasField("end"):
                        await run.write_stdin(offset, b"", True)
                        break
                    if self.service.lose_stdin_messages > 0:
                        self.service.lose_stdin_messages -= 1
                        raise GRPCError(Status.UNAVAILABLE, "the router lost the stream")
                    await run.write_stdin(offset, message.data, False)
                    offset += len(message.data)
        except BrokenPipeError as exc:
            raise GRPCError(Status.FAILED_PRECONDITION, f"stdin of exec is closed: {exc}") from None
        finally:
            if run.stdin_stream is owner:
                run.stdin_stream = None
        await stream.send_message(sr.TaskExecStdinWriteStreamResponse())

    async def TaskExecStdinStatus(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecStdinStatus")
        run = self._exec(sandbox, req.exec_id)
        if run.stdin_stream is not None:
            cut(run.stdin_stream)  # as Modal's router does: a resume evicts the stream
            run.stdin_stream = None
        await stream.send_message(
            sr.TaskExecStdinStatusResponse(
                num_bytes_written=run.stdin_written, closed=run.stdin_closed
            )
        )

    async def TaskExecStdinWrite(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecStdinWrite")
        run = self._exec(sandbox, req.exec_id)
        try:
            await run.write_stdin(req.offset, req.data, req.eof)
        except BrokenPipeError as exc:
            raise GRPCError(Status.FAILED_PRECONDITION, f"stdin of exec is closed: {exc}") from None
        await stream.send_message(sr.TaskExecStdinWriteResponse())

    async def TaskExecWait(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecWait")
        run = self._exec(sandbox, req.exec_id)
        await asyncio.shield(run.exited.wait())
        await stream.send_message(sr.TaskExecWaitResponse(**_exit_status(run)))

    async def TaskExecPoll(self, stream: Stream[Any, Any]) -> None:
        req, sandbox = await self._request(stream, "TaskExecPoll")
        run = self._exec(sandbox, req.exec_id)
        status = _exit_status(run) if run.exited.is_set() else {}
        await stream.send_message(sr.TaskExecPollResponse(**status))


_CUT: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()


def cut(task: asyncio.Task[Any]) -> None:
    """End a :func:`_breakable` handler's stream with UNAVAILABLE (on the fake's loop)."""
    _CUT.add(task)
    task.cancel()


@contextlib.contextmanager
def _breakable(why: str, handlers: set[asyncio.Task[Any]] | None = None) -> Iterator[None]:
    """Run a handler that :func:`cut` may end, as a router restart or an eviction ends a
    stream; a cancellation from the client (its reset) stays a cancellation. The handler's
    task is in ``handlers`` while it runs."""
    task = asyncio.current_task()
    assert task is not None
    if handlers is not None:
        handlers.add(task)
    try:
        yield
    except asyncio.CancelledError:
        if task not in _CUT:
            raise
        raise GRPCError(Status.UNAVAILABLE, why) from None
    finally:
        if handlers is not None:
            handlers.discard(task)


def _exit_status(run: Exec) -> dict[str, int]:
    code = run.returncode if run.returncode is not None else -1
    return {"signal": -code} if code < 0 else {"code": code}
