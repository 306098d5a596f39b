"""The session shell's log stream, read on the reading thread itself.

``GET {base}/v2/sandboxes/sessions/{sid}/cmd/{cid}/logs?teamId=`` answers chunked
NDJSON records ``{"stream", "data"}``, replayed from the start on every connection.
:class:`LogFeed` holds that connection and :class:`RecordParser` takes its bytes
as they come, so a read waits on the socket with its own timeout and no thread
stands between the service and the reader (a hand-off between threads cost a
warm call about a twentieth of its time).

A stream that breaks (transport error, truncation, the service's transient
``sandbox_stream_closed``, 429/5xx) raises :class:`StreamBroken`; the caller
resumes through the SDK's own reader, which reconnects and replays. A refusal for
good (the sandbox stopped or is gone) or an in-band error record ends the stream.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable

from .http11 import Endpoint, ResponseParser, WireError, open_socket

_MAX_ERROR_BODY = 64 * 1024
_MAX_RECORD = 16 << 20
_READ_SIZE = 1 << 16
RETRYABLE = frozenset({429, 502, 503, 504})
"""Statuses the service uses for transient refusals."""


class StreamBroken(Exception):
    """The log stream broke in a way a reconnect may mend (resume it elsewhere)."""


class RecordParser:
    """The logs response as bytes in, the stdout texts of its records out.

    :meth:`feed` returns the texts of the records its bytes complete; :attr:`ended` turns
    True when the response ended the stream (the body is complete, or the service
    refused it for good). Both :meth:`feed` and :meth:`finish` raise
    :class:`StreamBroken` for a stream worth resuming.
    """

    def __init__(self) -> None:
        self._response = ResponseParser()
        self._records = bytearray()
        self._error = bytearray()
        self.ended = False

    def feed(self, data: bytes) -> list[str]:
        try:
            body = self._response.feed(data)
        except WireError as exc:
            raise StreamBroken(str(exc)) from None
        texts: list[str] = []
        self._body(body, texts)
        if self._response.complete:
            self._end()
        return texts

    def finish(self) -> None:
        """The connection ended: fine after a complete (or to-the-end) body, else broken."""
        if self.ended:
            return
        try:
            self._response.finish()
        except WireError:
            raise StreamBroken("the log stream ended early") from None
        self._end()

    def _body(self, data: bytes, texts: list[str]) -> None:
        if not data:
            return
        if self._response.status != 200:
            self._error += data[: max(0, _MAX_ERROR_BODY - len(self._error))]
            return
        self._records += data
        start = 0
        while (end := self._records.find(b"\n", start)) >= 0:
            text = stdout_of(bytes(self._records[start:end]))
            start = end + 1
            if text:
                texts.append(text)
        del self._records[:start]
        if len(self._records) > _MAX_RECORD:
            raise StreamBroken("a log record too large")

    def _end(self) -> None:
        status = self._response.status
        if status != 200:
            code = error_code(bytes(self._error))
            if status in RETRYABLE or status >= 500 or code == "sandbox_stream_closed":
                raise StreamBroken(f"HTTP {status}")
        elif bytes(self._records).strip():
            raise StreamBroken("a truncated record")
        self.ended = True  # refused for good (stopped, gone), or the process ended


def stdout_of(line: bytes) -> str | None:
    """The stdout text of one NDJSON record (None for other records); raises
    :class:`StreamBroken` for the service's transient stream failure and
    :class:`StreamFailed` for any other in-band error."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None  # the SDK skips malformed complete records too
    if not isinstance(record, dict):
        return None
    data = record.get("data")
    if record.get("stream") == "stdout" and isinstance(data, str):
        return data
    if record.get("stream") == "error" and isinstance(data, dict):
        if data.get("code") == "sandbox_stream_closed":
            raise StreamBroken("sandbox_stream_closed")
        raise StreamFailed(str(data.get("code")))
    return None


class StreamFailed(Exception):
    """An in-band error record other than the transient one: the stream ends."""


def error_code(body: bytes) -> str | None:
    """The ``error.code`` of a JSON error answer, if it has one."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


class LogFeed:
    """One process's stdout text from its log stream, read by whoever calls :meth:`read`
    (one reader at a time). :attr:`delivered` counts the characters returned, for a
    resume elsewhere. :meth:`close` (from any thread) ends it: a read in progress and
    every later one return the end."""

    def __init__(self, endpoint: Endpoint, session_id: str, process_id: str) -> None:
        self._endpoint = endpoint
        self._path = endpoint.path(session_id, process_id, "logs")
        self._parser = RecordParser()
        self._sock: socket.socket | None = None
        self._poll = select.poll()
        self._lock = threading.Lock()
        self._closed = False
        self._unread = ""
        self.delivered = 0

    def read(self, timeout: float | None) -> str | None:
        """Text that arrived within ``timeout`` seconds (None: wait as long as it takes):
        ``None`` when none did, ``""`` at the end of the stream. Raises
        :class:`StreamBroken` (then the feed is spent)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            return self._guarded(lambda: self._read(deadline))

    def ended(self) -> bool:
        """Whether the stream is over, taking in what arrived without waiting (False while
        another thread reads). Raises :class:`StreamBroken` as :meth:`read` does."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._guarded(self._take_arrived) == ""
        finally:
            self._lock.release()

    def _take_arrived(self) -> str | None:
        while text := self._receive(time.monotonic()):
            self._unread += text  # returned by the next read
        return text

    def _guarded(self, step: Callable[[], str | None]) -> str | None:
        try:
            return step()
        except StreamFailed:
            self._parser.ended = True
            return ""
        except (OSError, StreamBroken) as exc:
            self._shut()
            if self._closed:
                return ""
            if isinstance(exc, StreamBroken):
                raise
            raise StreamBroken(f"{type(exc).__name__}: {exc}") from exc

    def _read(self, deadline: float | None) -> str | None:
        if self._unread:
            text, self._unread = self._unread, ""
            return text
        return self._receive(deadline)

    def _receive(self, deadline: float | None) -> str | None:
        if self._closed:
            self._shut()
            return ""
        if self._parser.ended:
            return ""
        sock = self._sock or self._open()
        while True:
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending() > 0
            if not pending:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not self._poll.poll(None if left is None else left * 1000):
                    return None
            try:
                data = sock.recv(_READ_SIZE)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                continue
            if self._closed:
                self._shut()
                return ""
            if not data:
                self._parser.finish()
                return ""
            texts = self._parser.feed(data)
            if texts:
                text = "".join(texts)
                self.delivered += len(text)
                return text
            if self._parser.ended:
                return ""

    def _open(self) -> socket.socket:
        sock = open_socket(self._endpoint, self._endpoint.connect_timeout)
        self._sock = sock
        sock.sendall(self._endpoint.head("GET", self._path, "Connection: close\r\n"))
        sock.setblocking(False)
        self._poll.register(sock, select.POLLIN)
        return sock

    def close(self) -> None:
        self._closed = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader, which lets the socket go
        if self._lock.acquire(blocking=False):
            try:
                self._shut()
            finally:
                self._lock.release()

    def _shut(self) -> None:
        """Let the connection go (under the lock); the feed is spent."""
        if self._sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._poll.unregister(self._sock)
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        self._parser.ended = True
