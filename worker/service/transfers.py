"""The platform's byte transfers: an upload's staged bytes into the sandbox, a file's out.

A transfer is a call of the session (``ToolCallMessage.transfer``): verified, run on
the worker holding the session's lease, in the session's sandbox, like its
``read_file``/``write_file`` tools, but byte-exact and never judged by the
approval guard (the platform holding the session's token is trusted with its
sandbox). The bytes move through the ledger (``worker.protocol.streams``), never
through the broker. Results are :class:`~worker.protocol.messages.FileInfo` JSON,
or ``{"error", "status"}`` (``not_found``, ``denied``, ``invalid``, ``error``).
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from environments.errors import Invalid, SbxError
from registry.context import ToolContext
from registry.results import to_json, tool_error
from registry.tools.file_access import (
    confine,
    file_error,
    iter_chunks,
    policy_of,
    resolve_path,
    too_large,
)
from worker.protocol.messages import FileInfo, ToolCallMessage
from worker.protocol.streams import CallStreams


class TransferIncomplete(SbxError):
    """The bytes staged for an upload are not those the client announced."""


class _TransferArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1)
    size: int | None = Field(default=None, ge=0)
    """Uploads: the bytes staged."""
    sha256: str | None = None
    """Uploads: the SHA-256 (hex) of the bytes staged."""


def run_transfer(message: ToolCallMessage, ctx: ToolContext, streams: CallStreams) -> str:
    """Carry out the upload or download ``message`` asks for (see module doc)."""
    try:
        args = _TransferArgs.model_validate(message.args)
    except ValidationError as exc:
        streams.discard(message.call_id)
        problems = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        return tool_error(f"malformed transfer: {problems}", status="invalid")
    try:
        if message.transfer == "upload":
            info = _upload(message.call_id, args, ctx, streams)
        else:
            info = _download(message.call_id, args, ctx, streams)
    except Exception as exc:
        streams.discard(message.call_id)
        return to_json(file_error(exc, args.path))
    return info.model_dump_json()


def _upload(call_id: str, args: _TransferArgs, ctx: ToolContext, streams: CallStreams) -> FileInfo:
    limit = policy_of(ctx.components).max_bytes
    if args.size is None or args.sha256 is None:
        raise Invalid("an upload names the size and sha256 of its bytes")
    if args.size > limit:
        raise too_large(args.size, limit)
    data = streams.take_staged(call_id, limit)
    if data is None:
        raise too_large(f"more than {limit}", limit)
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != args.size or digest != args.sha256:
        raise TransferIncomplete(
            f"the upload arrived incomplete ({len(data)} of {args.size} bytes, or altered): "
            "nothing was written; send it again"
        )
    with ctx.pool.use(ctx.session_id, ctx.backend) as env:
        env.attach()  # a sandbox stopped or removed since the last call comes back first
        path = resolve_path(env, args.path)
        confine(env, path, policy_of(ctx.components))
        env.write_file(path, data)
    return FileInfo(path=path, size=len(data), sha256=digest)


def _download(
    call_id: str, args: _TransferArgs, ctx: ToolContext, streams: CallStreams
) -> FileInfo:
    policy = policy_of(ctx.components)
    digest = hashlib.sha256()
    size = 0
    with ctx.pool.use(ctx.session_id, ctx.backend) as env:
        env.attach()  # a sandbox stopped or removed since the last call comes back first
        path = resolve_path(env, args.path)
        confine(env, path, policy)
        for piece in iter_chunks(env, path, policy.max_bytes):
            digest.update(piece)
            size += len(piece)
            streams.push_bytes(call_id, piece)
    return FileInfo(path=path, size=size, sha256=digest.hexdigest())
