"""A :class:`~environments.shell.channel.Channel` over one attached ``docker exec``.

Docker multiplexes a non-TTY exec's stdout and stderr on the hijacked HTTP
connection as frames: an 8-byte header (stream type, three zero bytes, the
payload size as big-endian uint32) followed by the payload. Stdin goes the
other way unframed. :class:`DockerExecChannel` strips the frames and hands
stdout on; stderr of the session shell is discarded (the bootstrap sends it
to /dev/null anyway, and each command merges its own into stdout).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from environments.shell.framing import read_line
from environments.shell.queued import ClosesOnce

_HEADER = struct.Struct(">BxxxI")
_STDOUT = 1
_READ_SIZE = 1 << 16


class FrameDecoder:
    """Incremental decoder of docker's multiplexed stream (bounded memory: one header)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._stream = 0
        self._left = 0  # payload bytes still to come in the current frame

    def feed(self, data: bytes) -> bytes:
        """Consume raw bytes; return the stdout payload they complete."""
        out = bytearray()
        view = memoryview(data)
        while view:
            if self._left:
                take = min(self._left, len(view))
                if self._stream == _STDOUT:
                    out += view[:take]
                self._left -= take
                view = view[take:]
                continue
            need = _HEADER.size - len(self._buf)
            self._buf += view[:need]
            view = view[need:]
            if len(self._buf) == _HEADER.size:
                self._stream, self._left = _HEADER.unpack(self._buf)
                self._buf.clear()
        return bytes(out)


class DockerExecChannel(ClosesOnce):
    """The shell started by ``exec_start(socket=True)``, read and written through the socket.

    ``on_close`` is called once by :meth:`close`, before the socket is closed (the
    environment kills the shell there with a second exec if its stream is still open).
    """

    def __init__(self, raw: Any, on_close: Callable[[], None] | None = None) -> None:
        self._raw = raw  # keeps the HTTP response (and so the connection) alive
        sock = getattr(raw, "_sock", raw)
        if not isinstance(sock, socket.socket):
            raise TypeError(f"unexpected docker attach socket: {type(raw).__name__}")
        self._sock: socket.socket = sock
        self._decoder = FrameDecoder()
        self._poll = select.poll()
        self._poll.register(self._sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        self.on_close = on_close
        self._closed = False
        self._eof = False
        self._pending = b""

    def write(self, data: bytes) -> None:
        if self._closed or self._eof:
            raise BrokenPipeError("docker exec stream is closed")
        self._sock.sendall(data)

    def read(self, timeout: float | None) -> bytes | None:
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        if self._eof:
            return b""
        # A frame header may arrive without payload bytes: keep reading until
        # stdout bytes come, EOF, or the deadline.
        remaining = timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ms = None if remaining is None else max(0, int(remaining * 1000))
            if not self._poll.poll(ms):
                return None
            try:
                chunk = self._sock.recv(_READ_SIZE)
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
                return b""
            data = self._decoder.feed(chunk)
            if data:
                return data
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None

    def read_line(self, timeout: float) -> bytes:
        """The first line of output (without its newline); later reads return what follows it."""
        line, self._pending = read_line(self.read, timeout)
        return line

    def shutdown_write(self) -> None:
        """Send EOF to the process's stdin; its output can still be read."""
        self._sock.shutdown(socket.SHUT_WR)

    def peer_gone(self) -> bool:
        """True when the exec already ended (EOF or error is pending on the socket)."""
        if self._closed or self._eof:
            return True
        events = self._poll.poll(0)
        if not events:
            return False
        try:
            peek = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return peek == b""

    def close(self) -> None:
        if not self._close_once():
            return
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._raw.close()
