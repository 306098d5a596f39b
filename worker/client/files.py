"""Files into and out of a session's sandbox: ``upload`` and ``download``.

Contracts:

* The bytes never travel in a broker message: an upload's pieces are staged in
  the ledger before its call is sent, a download's come back on the call's
  stream (``worker.protocol.streams``); the call itself is small.
* Both are calls of the session (its token is verified; they run in its sandbox,
  on the worker holding its lease) and reach only what that sandbox reaches.
  They are the platform's own operations: byte-exact, never redacted, not judged
  by the approval guard (the model's ``read_file``/``write_file`` tools are).
* Files larger than ``SBX_MAX_FILE_BYTES`` are refused (status ``invalid``);
  a download is checked against the size and SHA-256 the worker read.
* Failures raise :class:`~worker.errors.FileError` whose ``status`` is the wire
  status (``not_found``, ``denied``, ``invalid``, ``pending``, ``error``).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING

from worker.client.processes import parse_answer
from worker.protocol.errors import FileError
from worker.protocol.messages import FileInfo
from worker.protocol.streams import CallStreams, drain

if TYPE_CHECKING:
    from worker.client.sync import SandboxClient

CHUNK = 1 << 20
"""Bytes per piece staged in, or streamed out of, the ledger."""
_SLACK_S = 60.0


def _budget(client: SandboxClient) -> float:
    return float(client.settings.default_timeout) + _SLACK_S


def _check_size(size: int, client: SandboxClient) -> None:
    limit = client.settings.max_file_bytes
    if size > limit:
        raise FileError(
            f"the file is {size} bytes, over the limit of {limit} (SBX_MAX_FILE_BYTES); "
            "nothing was transferred",
            "invalid",
        )


def upload(client: SandboxClient, path: str, data: bytes) -> FileInfo:
    """Create or replace ``path`` (absolute, or relative to the session's working
    directory) in the session's sandbox with ``data``; its directory must exist.
    Returns what was written. Raises :class:`FileError`."""
    _check_size(len(data), client)
    wait = _budget(client)
    streams = CallStreams(client.ledger.client)
    call_id = uuid.uuid4().hex
    digest = hashlib.sha256(data).hexdigest()
    pieces = (data[i : i + CHUNK] for i in range(0, len(data), CHUNK))
    streams.stage(call_id, pieces, ttl=int(wait) + 60)
    args = {"path": path, "size": len(data), "sha256": digest}
    try:
        # Its stream stays empty; tool_stream is the call that carries a transfer.
        raw = drain(
            client.tool_stream("write_file", args, wait=wait, call_id=call_id, transfer="upload")
        )
    finally:
        streams.discard(call_id)  # taken by the worker, unless the call never ran
    return FileInfo.model_validate(parse_answer(raw, FileError))


def download(client: SandboxClient, path: str) -> bytes:
    """The bytes of ``path`` (absolute, or relative to the session's working directory)
    in the session's sandbox. Raises :class:`FileError`."""
    parts: list[bytes] = []
    received = 0
    stream = client.tool_stream(
        "read_file", {"path": path}, wait=_budget(client), transfer="download"
    )
    while True:
        try:
            piece = next(stream)
        except StopIteration as done:
            raw: str = done.value
            break
        received += len(piece)
        _check_size(received, client)  # a worker with a larger cap: refuse here too
        parts.append(piece)
    info = FileInfo.model_validate(parse_answer(raw, FileError))
    data = b"".join(parts)
    if len(data) != info.size or hashlib.sha256(data).hexdigest() != info.sha256:
        raise FileError(
            f"the download of {info.path} arrived incomplete ({len(data)} of {info.size} "
            "bytes); try again",
            "error",
        )
    return data

