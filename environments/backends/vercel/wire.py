"""The session shell's two hot endpoints, spoken directly over HTTP/1.1.

A warm call of the session shell is one stdin request and the output read from
the shell's NDJSON log stream. Through the SDK one stdin write costs ~0.6 ms of
client CPU (URL parsing and request building in its HTTP client, h11, three
wrapper layers) -- more than the whole round trip through the service's handler
-- and every output record passes through four generator layers. This module
speaks exactly these two documented endpoints on a kept-alive connection (TLS
with verified certificates for ``https``), with the SDK's semantics:

* ``POST {base}/v2/sandboxes/sessions/{sid}/cmd/{cid}/stdin?teamId=``, JSON
  ``{"data": base64, "offset": n}`` -> ``{"bytesWritten": n}``. Every request
  carries the offset of its first byte, so resending it after a lost answer,
  a dropped connection, 429 or 502-504 never duplicates input (the service
  skips what it has). Any other refusal ends the writer: the shell no longer
  takes input.
* ``GET {base}/v2/sandboxes/sessions/{sid}/cmd/{cid}/logs?teamId=``, chunked
  NDJSON records ``{"stream", "data"}``, replayed from the start on every
  connection. A stream that breaks (transport error, truncation, the service's
  transient ``sandbox_stream_closed``, 429/5xx) raises :class:`StreamBroken`;
  the caller resumes through the SDK's own reader, which reconnects and replays.

Everything else (lifecycle, helpers, files, closing stdin) stays with the SDK.
:func:`endpoint_for` returns ``None`` when a proxy applies to the API's address
(the SDK's HTTP client honours the proxy variables; this module does not): the
SDK then carries the stream too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_RETRIES = 5
_RETRYABLE = frozenset({429, 502, 503, 504})
_MAX_HEAD = 64 * 1024
_MAX_BODY = 1 << 20
_READ_SIZE = 1 << 16
_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


class WireError(OSError):
    """The service answered something that is not HTTP/1.1 as this module reads it."""


class StreamBroken(Exception):
    """The log stream broke in a way a reconnect may mend (resume it elsewhere)."""


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom: the API's address and the request credentials."""

    tls: bool
    host: str
    port: int
    base_path: str
    token: str
    team_id: str
    user_agent: str
    connect_timeout: float
    request_timeout: float

    def path(self, session_id: str, process_id: str, leaf: str) -> str:
        sid, cid = (urllib.parse.quote(p, safe="") for p in (session_id, process_id))
        team = urllib.parse.quote(self.team_id, safe="")
        return f"{self.base_path}/v2/sandboxes/sessions/{sid}/cmd/{cid}/{leaf}?teamId={team}"

    def head(self, method: str, path: str, extra: str = "") -> bytes:
        default = 443 if self.tls else 80
        host = self.host if self.port == default else f"{self.host}:{self.port}"
        return (
            f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {self.token}\r\n"
            f"User-Agent: {self.user_agent}\r\nAccept: application/json\r\n{extra}\r\n"
        ).encode()


def endpoint_for(
    base_url: str,
    token: str,
    team_id: str,
    *,
    user_agent: str,
    connect_timeout: float,
    request_timeout: float,
) -> Endpoint | None:
    """The :class:`Endpoint` of ``base_url``; ``None`` when a proxy applies to it or its
    scheme is neither ``http`` nor ``https`` (then the SDK carries the stream)."""
    url = urllib.parse.urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return None
    proxies = urllib.request.getproxies()
    if (proxies.get(url.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
        url.hostname
    ):
        return None
    return Endpoint(
        tls=url.scheme == "https",
        host=url.hostname,
        port=url.port or (443 if url.scheme == "https" else 80),
        base_path=url.path.rstrip("/"),
        token=token,
        team_id=team_id,
        user_agent=user_agent,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
    )


def _tls_context() -> ssl.SSLContext:
    global _tls
    with _tls_lock:
        if _tls is None:
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            _tls = context
        return _tls


class Connection:
    """One HTTP/1.1 connection: requests out, status/headers/body in."""

    def __init__(self, endpoint: Endpoint, timeout: float | None) -> None:
        sock = socket.create_connection(
            (endpoint.host, endpoint.port), timeout=endpoint.connect_timeout
        )
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if endpoint.tls:
                sock = _tls_context().wrap_socket(sock, server_hostname=endpoint.host)
            sock.settimeout(timeout)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._in = sock.makefile("rb")
        self.reusable = True

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def _line(self) -> bytes:
        line = self._in.readline(_MAX_HEAD)
        if not line.endswith(b"\n"):
            raise WireError("connection closed in a response head")
        return line

    def read_head(self) -> tuple[int, dict[str, str]]:
        """The status code and (lower-cased) headers of the next response."""
        parts = self._line().split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise WireError("not an HTTP/1.1 response")
        headers: dict[str, str] = {}
        size = 0
        while (line := self._line()) not in (b"\r\n", b"\n"):
            size += len(line)
            if size > _MAX_HEAD:
                raise WireError("response head too large")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("connection", "").lower() == "close":
            self.reusable = False
        return int(parts[1]), headers

    def body_chunks(self, headers: dict[str, str]) -> Iterator[bytes]:
        """The body as it arrives (chunked, sized, or up to the end of the connection)."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size = int(self._line().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._line() not in (b"\r\n", b"\n"):
                        pass
                    return
                while size > 0:
                    data = self._in.read1(min(size, _READ_SIZE))
                    if not data:
                        raise WireError("connection closed in a chunk")
                    size -= len(data)
                    yield data
                self._line()
        elif "content-length" in headers:
            left = int(headers["content-length"])
            while left > 0:
                data = self._in.read1(min(left, _READ_SIZE))
                if not data:
                    raise WireError("connection closed in a response body")
                left -= len(data)
                yield data
        else:
            self.reusable = False
            while data := self._in.read1(_READ_SIZE):
                yield data

    def read_response(self) -> tuple[int, dict[str, str], bytes]:
        status, headers = self.read_head()
        body = bytearray()
        for data in self.body_chunks(headers):
            body += data
            if len(body) > _MAX_BODY:
                raise WireError("response body too large")
        return status, headers, bytes(body)

    def shutdown(self) -> None:
        """Unblock a reader waiting on this connection (from another thread)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._in.close()
            self._sock.close()


def _retry_delay(attempt: int, headers: dict[str, str] | None = None) -> float:
    """The SDK's backoff (0.4 s doubling; a 429's ``retry-after`` up to 20 s)."""
    with contextlib.suppress(KeyError, ValueError):
        if headers is not None:
            return min(max(float(headers["retry-after"]), 0.0), 20.0)
    return 0.4 * 2.0 ** max(attempt - 1, 0)


class StdinWriter:
    """Ordered writes to one process's stdin (see the module docstring).

    :meth:`write` never waits for the service: the request leaves from the caller's
    thread when none is in flight, otherwise the data waits and goes out, coalesced,
    when the answer to the one in flight has come. A responder thread reads the
    answers and resends after failures; when the service refuses input for good it
    calls ``on_broken`` once and later writes raise ``BrokenPipeError``. The shell's
    stdin must be written through this writer only, from its start (offset 0).
    """

    def __init__(
        self, endpoint: Endpoint, session_id: str, process_id: str, on_broken: Callable[[], None]
    ) -> None:
        self._endpoint = endpoint
        self._path = endpoint.path(session_id, process_id, "stdin")
        self._on_broken = on_broken
        self._lock = threading.Lock()
        self._offset = 0
        self._pending = bytearray()
        self._busy = False
        self._broken = False
        self._closed = False
        self._current = (0, b"")
        self._conn: Connection | None = None
        self._send_failed = False
        self._turns: queue.SimpleQueue[bool] = queue.SimpleQueue()
        threading.Thread(target=self._respond, name="sbx-vercel-stdin", daemon=True).start()

    def write(self, data: bytes) -> None:
        """Send ``data`` after everything written before; ``BrokenPipeError`` once broken."""
        with self._lock:
            if self._broken or self._closed:
                raise BrokenPipeError("the shell's stdin no longer takes input")
            if self._busy:
                self._pending += data
                return
            self._busy = True
            self._current = (self._offset, data)
        self._send()
        self._turns.put(True)

    def close(self) -> None:
        """Stop the responder and drop the connection (stdin itself stays open)."""
        with self._lock:
            self._closed = True
        self._turns.put(False)
        conn = self._conn
        if conn is not None:
            conn.shutdown()

    def _request(self) -> bytes:
        offset, data = self._current
        body = json.dumps({"data": base64.b64encode(data).decode("ascii"), "offset": offset})
        head = self._endpoint.head(
            "POST",
            self._path,
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n",
        )
        return head + body.encode("ascii")

    def _send(self) -> None:
        """Send the current request on the kept-alive connection (opened if needed)."""
        self._send_failed = False
        try:
            if self._conn is None or not self._conn.reusable:
                self._reconnect()
            assert self._conn is not None
            self._conn.send(self._request())
        except OSError:
            self._send_failed = True  # the responder resends on a new connection

    def _reconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._conn = Connection(self._endpoint, self._endpoint.request_timeout)

    def _respond(self) -> None:
        while self._turns.get():
            try:
                self._finish_turn()
            except Exception:  # never leave a writer busy forever
                self._break()

    def _finish_turn(self) -> None:
        """Read answers (resending as needed) until no data waits; or break."""
        attempt = 0
        while not self._closed:
            try:
                if self._send_failed or self._conn is None:
                    raise WireError("request not sent")
                status, headers, body = self._conn.read_response()
            except OSError:
                attempt += 1
                if attempt > _RETRIES or self._closed:
                    return self._break()
                if attempt > 1:  # the first resend is at once (a stale kept-alive connection)
                    time.sleep(_retry_delay(attempt - 1))
                if self._conn is not None:
                    self._conn.reusable = False
                self._send()
                continue
            if status in _RETRYABLE and attempt < _RETRIES:
                attempt += 1
                time.sleep(_retry_delay(attempt, headers if status == 429 else None))
                self._send()
                continue
            written = _bytes_written(body) if status == 200 else None
            start, data = self._current
            if written is None or not start <= written <= start + len(data):
                return self._break()
            with self._lock:
                self._offset = written
                if written < start + len(data):
                    self._current = (written, data[written - start :])
                elif self._pending:
                    self._current = (written, bytes(self._pending))
                    self._pending.clear()
                else:
                    self._busy = False
                    return None
            attempt = 0
            self._send()
        return None

    def _break(self) -> None:
        with self._lock:
            already, self._broken, self._busy = self._broken, True, False
            self._pending.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if not already and not self._closed:
            self._on_broken()


def _bytes_written(body: bytes) -> int | None:
    try:
        value = json.loads(body).get("bytesWritten")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class LogStream:
    """A process's stdout text from its log stream, from the start (see the module
    docstring). :attr:`delivered` counts the characters yielded, for a resume."""

    def __init__(self, endpoint: Endpoint, session_id: str, process_id: str) -> None:
        self._endpoint = endpoint
        self._path = endpoint.path(session_id, process_id, "logs")
        self._conn: Connection | None = None
        self._closed = False
        self.delivered = 0

    def close(self) -> None:
        """End the iteration from another thread (it returns quietly)."""
        self._closed = True
        if self._conn is not None:
            self._conn.shutdown()

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._records()
        except _StreamFailed:
            return  # the service reported the stream failed for good
        except (OSError, ValueError) as exc:
            if not self._closed:
                raise StreamBroken(type(exc).__name__) from exc
        finally:
            if self._conn is not None:
                self._conn.close()

    def _records(self) -> Iterator[str]:
        conn = self._conn = Connection(self._endpoint, None)
        if self._closed:
            return
        conn.send(self._endpoint.head("GET", self._path, "Connection: close\r\n"))
        status, headers = conn.read_head()
        if status != 200:
            code = _error_code(b"".join(conn.body_chunks(headers))[:_MAX_BODY])
            if status in _RETRYABLE or status >= 500 or code == "sandbox_stream_closed":
                raise StreamBroken(f"HTTP {status}")
            return  # refused for good (stopped, gone): the stream has ended
        rest = b""
        for data in conn.body_chunks(headers):
            *lines, rest = (rest + data).split(b"\n")
            for line in lines:
                text = _stdout_of(line)
                if text:
                    self.delivered += len(text)
                    yield text
        if rest.strip():
            raise StreamBroken("truncated record")


def _stdout_of(line: bytes) -> str | None:
    """The stdout text of one NDJSON record (None for other records); raises
    :class:`StreamBroken` for the service's transient stream failure."""
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
        raise _StreamFailed(str(data.get("code")))
    return None


class _StreamFailed(Exception):
    """An in-band error record other than the transient one: the stream ends."""


def _error_code(body: bytes) -> str | None:
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None
