"""A minimal HTTP/1.1 client for :mod:`.wire` and :mod:`.logfeed`: one kept-alive
connection, TLS with verified certificates for ``https``, responses parsed as their bytes
arrive (:class:`ResponseParser`: sized, chunked or to the end).

It sends exactly the requests those modules build and reads their answers; it follows
no redirects, sends no cookies and knows no proxies (:func:`endpoint_for` says when a
proxy applies, so the SDK's own client is used instead).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass

_MAX_HEAD = 64 * 1024
_MAX_BODY = 1 << 20
_READ_SIZE = 1 << 16
_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


class WireError(OSError):
    """The service answered something that is not HTTP/1.1 as this module reads it."""


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


def open_socket(endpoint: Endpoint, timeout: float | None) -> socket.socket:
    """A connected socket to ``endpoint`` (TLS with verified certificates for ``https``),
    with ``timeout`` for its operations; raises ``OSError`` (``ssl.SSLError`` included)."""
    address = (endpoint.host, endpoint.port)
    sock = socket.create_connection(address, timeout=endpoint.connect_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if endpoint.tls:
            sock = _tls_context().wrap_socket(sock, server_hostname=endpoint.host)
        sock.settimeout(timeout)
    except BaseException:
        sock.close()
        raise
    return sock


# Where a ResponseParser is in the response.
_HEAD, _SIZE, _DATA, _DATA_END, _TRAILER, _SIZED, _TO_EOF, _DONE = range(8)


class ResponseParser:
    """One HTTP/1.1 response as its bytes arrive: the head, then the body unframed
    (chunked, sized, or up to the end of the connection).

    :meth:`feed` returns the body bytes its input completes; :attr:`status` and
    :attr:`headers` are set once the head is in; :attr:`complete` turns True at the end
    of the body (bytes past it stay in :attr:`rest`). Malformed input raises
    :class:`WireError`.
    """

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.rest = bytearray()
        self._state = _HEAD
        self._left = 0
        self._head = 0

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    @property
    def to_eof(self) -> bool:
        """Whether the body ends only with the connection (it cannot be reused)."""
        return self._state == _TO_EOF

    def feed(self, data: bytes) -> bytes:
        self.rest += data
        body = bytearray()
        while self._state != _DONE and self._step(body):
            pass
        return bytes(body)

    def finish(self) -> None:
        """The connection ended: the end of a body read to it, else :class:`WireError`."""
        if self._state == _TO_EOF:
            self._state = _DONE
        elif self._state != _DONE:
            raise WireError("connection closed inside a response")

    def _line(self) -> bytes | None:
        end = self.rest.find(b"\n")
        if end < 0:
            if len(self.rest) > _MAX_HEAD:
                raise WireError("a response line too long")
            return None
        line = bytes(self.rest[:end]).rstrip(b"\r")
        del self.rest[: end + 1]
        return line

    def _step(self, body: bytearray) -> bool:
        """Parse one piece; False when it needs more bytes."""
        if self._state in (_DATA, _SIZED, _TO_EOF):
            if not self.rest:
                return False
            take = len(self.rest) if self._state == _TO_EOF else min(self._left, len(self.rest))
            body += self.rest[:take]
            del self.rest[:take]
            self._left -= take
            if self._left == 0 and self._state == _DATA:
                self._state = _DATA_END
            elif self._left == 0 and self._state == _SIZED:
                self._state = _DONE
            return True
        line = self._line()
        if line is None:
            return False
        if self._state == _HEAD:
            self._head_line(line)
        elif self._state == _SIZE:
            try:
                self._left = int(line.split(b";")[0].strip() or b"0", 16)
            except ValueError:
                raise WireError("a malformed chunk size") from None
            self._state = _DATA if self._left > 0 else _TRAILER
        elif self._state == _DATA_END:
            if line:
                raise WireError("a chunk longer than its size")
            self._state = _SIZE
        elif self._state == _TRAILER and not line:
            self._state = _DONE
        return True

    def _head_line(self, line: bytes) -> None:
        self._head += len(line) + 1
        if self._head > _MAX_HEAD:
            raise WireError("response head too large")
        if self.status == 0:
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise WireError("not an HTTP/1.1 response")
            self.status = int(parts[1])
        elif line:
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()
        elif "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._state = _SIZE
        elif "content-length" in self.headers:
            try:
                self._left = int(self.headers["content-length"])
            except ValueError:
                raise WireError("a malformed content-length") from None
            self._state = _SIZED if self._left > 0 else _DONE
        else:
            self._state = _TO_EOF


class Connection:
    """One HTTP/1.1 connection: requests out, status/headers/body in."""

    def __init__(self, endpoint: Endpoint, timeout: float | None) -> None:
        self._sock = open_socket(endpoint, timeout)
        self._rest = b""
        self.reusable = True

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def read_response(self) -> tuple[int, dict[str, str], bytes]:
        """The next response's status, (lower-cased) headers and body (at most 1 MiB, else
        :class:`WireError`)."""
        parser = ResponseParser()
        body = bytearray(parser.feed(self._rest))
        while not parser.complete:
            data = self._sock.recv(_READ_SIZE)
            if not data:
                parser.finish()
                break
            body += parser.feed(data)
            if len(body) > _MAX_BODY:
                raise WireError("response body too large")
        self._rest = bytes(parser.rest)
        if parser.to_eof or parser.headers.get("connection", "").lower() == "close":
            self.reusable = False
        return parser.status, parser.headers, bytes(body)

    def shutdown(self) -> None:
        """Unblock a reader waiting on this connection (from another thread)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
