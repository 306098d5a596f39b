"""Pieces the :class:`~environments.shell.channel.Channel` implementations share.

:class:`QueuedOutput` is the reading half of a channel (a base class) whose
output a producer (a pump task on asyncssh's or an SDK's event loop, an SDK's log
stream) hands to the session shell's thread through a thread-safe queue;
:class:`QueuedReads` gives a channel holding one its ``read``/``read_line``.
:class:`ClosesOnce` runs a channel's ``on_close`` exactly once.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable

from environments.shell.framing import read_line


class QueuedOutput:
    """Output chunks put by one thread, read by another; ``b""`` marks the end."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending = b""
        self.eof = False
        """True once a read met the end of the output."""

    def put(self, chunk: bytes) -> None:
        """Hand on ``chunk`` (from any thread); ``b""`` ends the output."""
        self._queue.put(chunk)

    def read(self, timeout: float | None) -> bytes | None:
        """What arrived (all of it, coalesced); ``None`` after ``timeout`` s; ``b""`` at the end."""
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
        """The first line of output (without its newline); later reads return what follows it."""
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


class ClosesOnce:
    """``on_close`` bookkeeping of a channel: :meth:`_close_once` runs it the first time only."""

    on_close: Callable[[], None] | None = None
    _closed: bool = False
    _closing: bool = False

    def _close_once(self) -> bool:
        """Run ``on_close`` (its errors suppressed), then mark the channel closed; False when
        it was closed (or is being closed) already.

        ``on_close`` sees the channel as it was: whether the shell's stream already ended
        is what decides if a shell dropped mid-command still needs killing."""
        if self._closed or self._closing:
            return False
        self._closing = True
        try:
            if self.on_close is not None:
                with contextlib.suppress(Exception):
                    self.on_close()
        finally:
            self._closed = True
        return True
