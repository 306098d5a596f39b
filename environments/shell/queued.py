"""Output a producer hands over in chunks, read by a session shell with a timeout.

Channels whose output arrives on another thread or an event loop (an SSH
channel, an SDK's log stream) put each chunk into a :class:`QueuedOutput`;
:meth:`QueuedOutput.read` is then their :meth:`~environments.shell.driver.Channel.read`.
"""

from __future__ import annotations

import queue

from environments.shell.framing import read_line


class QueuedOutput:
    """Chunks from :meth:`put`, ended by ``put(b"")``; read in order, coalesced."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending = b""
        self.eof = False
        """True once a read returned (or reached) the end of the stream."""

    def put(self, data: bytes) -> None:
        """Hand over ``data``; ``b""`` ends the stream (later chunks are never read)."""
        self._queue.put(data)

    def read(self, timeout: float | None) -> bytes | None:
        """Next bytes (all that arrived so far); ``None`` after ``timeout``; ``b""`` at the end."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        if self.eof:
            return b""
        try:
            first = self._queue.get(timeout=timeout) if timeout != 0 else self._queue.get_nowait()
        except queue.Empty:
            return None
        if not first:
            self.eof = True
            return b""
        chunks = [first]
        while True:  # coalesce what is already there
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if not more:
                self.eof = True
                break
            chunks.append(more)
        return b"".join(chunks)

    def read_line(self, timeout: float) -> bytes:
        """The first line (without its newline); later reads return what follows it."""
        line, self._pending = read_line(self.read, timeout)
        return line


class QueuedReads:
    """``read``/``read_line`` of a channel whose output a producer puts into ``_output``."""

    _output: QueuedOutput

    def read(self, timeout: float | None) -> bytes | None:
        return self._output.read(timeout)

    def read_line(self, timeout: float) -> bytes:
        """The first line of output (without its newline); later reads return what follows it."""
        return self._output.read_line(timeout)
