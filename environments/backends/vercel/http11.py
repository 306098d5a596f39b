"""A minimal HTTP/1.1 client for :mod:`.wire`: one kept-alive connection, TLS with
verified certificates for ``https``, responses read sized, chunked or to the end.

It sends exactly the requests :mod:`.wire` builds and reads their answers; it follows
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
from collections.abc import Iterator
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


class Connection:
    """One HTTP/1.1 connection: requests out, status/headers/body in."""

    def __init__(self, endpoint: Endpoint, timeout: float | None) -> None:
        sock = open_socket(endpoint, timeout)
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

    def read_body(self, headers: dict[str, str]) -> bytes:
        """The whole body (at most 1 MiB, else :class:`WireError`)."""
        body = bytearray()
        for data in self.body_chunks(headers):
            body += data
            if len(body) > _MAX_BODY:
                raise WireError("response body too large")
        return bytes(body)

    def read_response(self) -> tuple[int, dict[str, str], bytes]:
        status, headers = self.read_head()
        return status, headers, self.read_body(headers)

    def shutdown(self) -> None:
        """Unblock a reader waiting on this connection (from another thread)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._in.close()
            self._sock.close()
