"""Bytes that travel beside a call through the ledger: its stream, and staged uploads.

Never through the broker: a message stays small whatever the file or output size.

* **Stream** (``sbx:call:<id>:stream``, a list): while a call runs its worker
  appends pieces -- a terminal command's redacted output as UTF-8 text, or a
  download's bytes -- and only then delivers the call's result. The caller pops
  with one blocking pop over the stream and the result mailbox, the stream
  first (:meth:`worker.protocol.ledger.CallLedger.take_streamed`), so it gets
  every piece before the result.
* **Live output is bounded**: at most :data:`LIVE_MAX_PIECES` pieces of at most
  :data:`LIVE_PIECE_BYTES` wait for a reader; output arriving beyond that is
  dropped and, once the reader caught up, a note saying how many bytes were
  skipped takes its place. Download bytes are bounded by the size cap
  (``SBX_MAX_FILE_BYTES``) instead and never dropped.
* **Staged uploads** (``sbx:call:<id>:upload``, a list): the client pushes a
  file's pieces before it sends the call; the worker pops them when it runs it.
* Everything expires: a stream :data:`STREAM_TTL_S` after its last piece, a
  staged upload when its call's deadline has passed.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

LIVE_PIECE_BYTES = 64 * 1024
"""The most bytes of live output in one piece."""
LIVE_MAX_PIECES = 64
"""The most pieces of live output waiting for a reader (so at most 4 MiB per call)."""
STREAM_TTL_S = 600
"""Seconds a stream outlives its last piece (its reader is gone, or has its result)."""


Result = TypeVar("Result")


def drain(stream: Generator[Any, None, Result]) -> Result:
    """Run a call's stream to its end, passing over its pieces; the call's result."""
    while True:
        try:
            next(stream)
        except StopIteration as done:
            result: Result = done.value
            return result


def stream_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:stream"


def skipped_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:skipped"


def upload_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:upload"


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of a call's stream."""

    data: bytes


# Append a piece of live output unless LIVE_MAX_PIECES wait already: then count its bytes
# as skipped. The first piece that fits after a gap is preceded by a note of the gap.
_PUSH_LIVE_SCRIPT = """
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then
  redis.call('INCRBY', KEYS[2], string.len(ARGV[1]))
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  return 0
end
local skipped = redis.call('GET', KEYS[2])
if skipped then
  redis.call('DEL', KEYS[2])
  redis.call('RPUSH', KEYS[1], '\\n[sbx: ' .. skipped ..
    ' bytes of live output skipped: the reader fell behind; the result has the output]\\n')
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


class CallStreams:
    """Streams and staged uploads of calls in the ledger's Redis ``client``."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._push_live = client.register_script(_PUSH_LIVE_SCRIPT)

    def push_live(self, call_id: str, text: str) -> bool:
        """Append live output (at most :data:`LIVE_PIECE_BYTES` bytes as UTF-8); False when
        it was dropped because the reader fell behind."""
        keys = [stream_key(call_id), skipped_key(call_id)]
        return bool(self._push_live(keys=keys, args=[text, LIVE_MAX_PIECES, STREAM_TTL_S]))

    def push_bytes(self, call_id: str, data: bytes) -> None:
        """Append ``data`` to the stream (downloads: never dropped)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(stream_key(call_id), data)
        pipe.expire(stream_key(call_id), STREAM_TTL_S)
        pipe.execute()

    def stage(self, call_id: str, pieces: Iterable[bytes], ttl: int) -> None:
        """Push an upload's pieces before its call is sent; they expire after ``ttl`` s."""
        key = upload_key(call_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(key)
        for piece in pieces:
            pipe.rpush(key, piece)
        pipe.expire(key, max(1, ttl))
        pipe.execute()

    def take_staged(self, call_id: str, max_bytes: int) -> bytes | None:
        """The staged upload of ``call_id`` (``b""``: nothing staged), removed from the
        ledger; None when more than ``max_bytes`` were staged (removed too)."""
        key = upload_key(call_id)
        parts: list[bytes] = []
        total = 0
        while True:
            piece: Any = self.client.lpop(key)
            if piece is None:
                break
            total += len(piece)
            if total > max_bytes:
                self.client.delete(key)
                return None
            parts.append(bytes(piece))
        return b"".join(parts)

    def discard(self, call_id: str) -> None:
        """Drop the call's stream and staged upload (the caller is done with them)."""
        self.client.delete(stream_key(call_id), skipped_key(call_id), upload_key(call_id))
