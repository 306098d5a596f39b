"""The reading half of a :class:`~environments.shell.driver.Channel` fed from another thread.

Backends whose byte stream is read by someone else -- an asyncio task (ssh),
an SDK's websocket iterator (daytona) -- hand each chunk to
:meth:`QueuedChannel.feed` and the end to :meth:`QueuedChannel.feed_end`;
the session shell reads them with :meth:`QueuedChannel.read`, which takes
everything already queued at once. Closing runs ``on_close`` once, then the
subclass's :meth:`QueuedChannel._release`.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable

from environments.shell.framing import read_line


class QueuedChannel:
    """Queue-backed reads, ``read_line`` and a close that runs once; subclasses write."""

    def __init__(self, on_close: Callable[[], None] | None = None) -> None:
        self._queue: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending = b""
        self._eof = False
        self._closed = False
        self.on_close = on_close

    def feed(self, data: bytes) -> None:
        """Queue a chunk of output (any thread); an empty chunk is ignored."""
        if data:
            self._queue.put(data)

    def feed_end(self) -> None:
        """Mark the end of the stream (any thread)."""
        self._queue.put(b"")

    def unread(self, data: bytes) -> None:
        """Put ``data`` back in front of what the next read returns."""
        self._pending = data + self._pending

    def read(self, timeout: float | None) -> bytes | None:
        """Next output (all that is queued); ``None`` after ``timeout``; ``b""`` at the end."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        if self._eof:
            return b""
        try:
            first = self._queue.get(timeout=timeout) if timeout != 0 else self._queue.get_nowait()
        except queue.Empty:
            return None
        if not first:
            self._eof = True
            return b""
        chunks = [first]
        while True:  # coalesce what is already there
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if not more:
                self._eof = True
                break
            chunks.append(more)
        return b"".join(chunks)

    def read_line(self, timeout: float) -> bytes:
        """The first line of output (without its newline); later reads return what follows it."""
        line, rest = read_line(self.read, timeout)
        self.unread(rest)
        return line

    def close(self) -> None:
        """Run ``on_close`` (once), then release the stream. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.on_close is not None:
            with contextlib.suppress(Exception):
                self.on_close()
        self._release()

    def _release(self) -> None:
        """Free the underlying stream; called once by :meth:`close`."""
