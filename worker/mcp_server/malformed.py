"""Answers to the stdio lines that are no JSON-RPC message (not JSON, a batch, a bad shape).

The SDK's stdio transport hands such a line to the server as an exception, which the
server drops without a word: a client that sent it waits for an answer forever. JSON-RPC
2.0 says what to answer, and :func:`answering_malformed` answers it:

* a line that is not JSON: ``-32700`` (parse error), ``id`` null;
* a request with a usable ``id`` but a bad shape (``params`` no object, ``jsonrpc`` not
  ``"2.0"``): ``-32600`` (invalid request) under that ``id``, so the waiting call ends;
* a batch (MCP has none), a scalar, an object that names no method: ``-32600``, ``id`` null;
* a malformed notification or response (no ``id``, or a ``result``/``error``): nothing,
  as JSON-RPC answers neither.

Over HTTP the SDK answers these itself (HTTP 400 with the same codes).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger(__name__)

Inbound = SessionMessage | Exception


def malformed_answer(exc: Exception) -> types.JSONRPCError | None:
    """The error answering the line ``exc`` rejected; None when JSON-RPC answers nothing."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    if any(error["type"] == "json_invalid" for error in errors):
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    message = next((e["input"] for e in errors if _is_envelope(e)), None)
    if message is None or "method" not in message:
        if message is not None and ("result" in message or "error" in message):
            return None  # a malformed response: never answered
        whole = errors[0].get("input") if errors else None
        what = "a batch (MCP has none)" if isinstance(whole, list) else "no JSON-RPC message"
        return _error(None, types.INVALID_REQUEST, f"Invalid request: {what}")
    if "id" not in message:
        return None  # a malformed notification: never answered
    request_id = message["id"]
    usable = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    detail = "; ".join(
        f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}"
        for e in errors
        if e["loc"][:1] == ("JSONRPCRequest",)
    )
    return _error(request_id if usable else None, types.INVALID_REQUEST,
                  f"Invalid request: {detail}")  # fmt: skip


def _is_envelope(error: Any) -> bool:
    """Whether ``error`` carries the whole message object: pydantic gives it as the
    input of a missing field of the message."""
    return (
        error["type"] == "missing"
        and len(error["loc"]) == 2
        and isinstance(error.get("input"), dict)
    )


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                              error=types.ErrorData(code=code, message=message))  # fmt: skip


@contextlib.asynccontextmanager
async def answering_malformed(
    read: ReadStream[Inbound], write: WriteStream[SessionMessage]
) -> AsyncIterator[MemoryObjectReceiveStream[Inbound]]:
    """``read`` without the lines that are no message: each answered on ``write`` (see
    the module doc); every message passes on in order. The yielded stream ends when
    ``read`` does."""
    send, receive = anyio.create_memory_object_stream[Inbound](0)

    async def forward() -> None:
        async with send:
            async for item in read:
                if isinstance(item, SessionMessage):
                    await send.send(item)
                    continue
                answer = malformed_answer(item)
                log.debug("malformed line on stdin: %s", item)
                if answer is not None:
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await write.send(SessionMessage(answer))

    async with anyio.create_task_group() as group:
        group.start_soon(forward)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()
