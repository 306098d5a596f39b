"""HTTP side of the fake Vercel Sandbox API: routes, auth, NDJSON streams, request record."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .runtime import Command
from .service import ApiError, FakeService

_S = r"/v2/sandboxes/sessions/(?P<sid>[^/]+)"
_C = _S + r"/cmd/(?P<cid>[^/]+)"


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, service: FakeService, token: str, team_id: str) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.service, self.token, self.team_id = service, token, team_id
        self.requests: list[dict[str, Any]] = []
        self.record_lock = threading.Lock()
        self.tear_next_log_stream: int | None = None
        """The next log stream breaks after this many batches (a torn chunk, then the
        connection closes), as a dropped connection would."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes: without this, Nagle plus the
        # client's delayed ACK hold every small response for 40 ms.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- plumbing ---------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode())

    def _stream(self, records: Iterator[list[dict[str, Any]]], tear: int | None = None) -> None:
        """An NDJSON response, one chunk per batch of records; the connection drops inside
        the chunk after the first ``tear`` batches."""
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for sent, batch in enumerate(records, 1):
                data = b"".join(json.dumps(record).encode() + b"\n" for record in batch)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                if sent == tear:
                    self.wfile.write(b'40\r\n{"stream": "stdout", "data": "torn')
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def _authorized(self, query: dict[str, str]) -> bool:
        expected = f"Bearer {self.server.token}"
        return (
            self.headers.get("authorization") == expected
            and query.get("teamId") == self.server.team_id
        )

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query))
        raw = self._body()
        body: Any = None
        if raw and self.headers.get("content-type", "").startswith("application/json"):
            body = json.loads(raw)
        with self.server.record_lock:
            self.server.requests.append(
                {
                    "method": method,
                    "path": url.path,
                    "query": query,
                    "body": body,
                    "user_agent": self.headers.get("user-agent", ""),
                }
            )
        if not self._authorized(query):
            self._json(403, {"error": {"code": "forbidden", "message": "Not authorized"}})
            return
        for pattern, verb, action in ROUTES:
            match = re.fullmatch(pattern, url.path)
            if match and verb == method:
                try:
                    action(self, match.groupdict(), query, body if body is not None else raw)
                except ApiError as exc:
                    self._json(exc.status, {"error": {"code": exc.code, "message": exc.message}})
                return
        self._json(404, {"error": {"code": "not_found", "message": f"no route {url.path}"}})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    # -- routes -----------------------------------------------------------------

    @property
    def svc(self) -> FakeService:
        return self.server.service

    def create(self, _: dict[str, str], __: dict[str, str], body: Any) -> None:
        self._json(200, self.svc.create(body))

    def get(self, m: dict[str, str], q: dict[str, str], _: Any) -> None:
        self._json(200, self.svc.get(m["name"], resume=q.get("resume") == "true"))

    def query(self, _: dict[str, str], q: dict[str, str], __: Any) -> None:
        self._json(200, self.svc.query(q))

    def destroy(self, m: dict[str, str], _: dict[str, str], __: Any) -> None:
        self._json(200, self.svc.destroy(m["name"]))

    def update(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        self._json(200, self.svc.update(m["name"], body))

    def session(self, m: dict[str, str], _: dict[str, str], __: Any) -> None:
        self._json(200, {"session": self.svc.session(m["sid"], running=False).payload()})

    def stop(self, m: dict[str, str], _: dict[str, str], __: Any) -> None:
        self._json(200, self.svc.stop(m["sid"]))

    def extend(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        self._json(200, self.svc.extend(m["sid"], body))

    def run(self, m: dict[str, str], q: dict[str, str], body: Any) -> None:
        command = self.svc.run(m["sid"], body)
        if q.get("wait") == "true" and q.get("logs") == "true":
            self._stream(_run_records(command))
        else:
            self._json(200, {"command": command.payload()})

    def commands(self, m: dict[str, str], _: dict[str, str], __: Any) -> None:
        session = self.svc.session(m["sid"], running=False)
        self._json(200, {"commands": [c.payload() for c in session.commands.values()]})

    def get_command(self, m: dict[str, str], q: dict[str, str], _: Any) -> None:
        command = self.svc.command(m["sid"], m["cid"])
        if q.get("wait") == "true":
            command.wait()
        self._json(200, {"command": command.payload()})

    def logs(self, m: dict[str, str], _: dict[str, str], __: Any) -> None:
        with self.server.record_lock:
            tear, self.server.tear_next_log_stream = self.server.tear_next_log_stream, None
        self._stream(_log_records(self.svc.command(m["sid"], m["cid"])), tear)

    def kill(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        command = self.svc.command(m["sid"], m["cid"])
        command.kill(int(body.get("signal") or 15))
        self._json(200, {"command": command.payload()})

    def stdin(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        self._json(200, self.svc.stdin(m["sid"], m["cid"], body))

    def read(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        self._send(200, self.svc.read(m["sid"], body), "application/octet-stream")

    def write(self, m: dict[str, str], _: dict[str, str], raw: Any) -> None:
        self.svc.write(m["sid"], self.headers.get("x-cwd") or "/", raw)
        self._json(200, {})

    def mkdir(self, m: dict[str, str], _: dict[str, str], body: Any) -> None:
        self.svc.mkdir(m["sid"], body)
        self._json(200, {})


def _log_records(command: Command) -> Iterator[list[dict[str, Any]]]:
    """Every log record of ``command`` from the first, following it until it is done, in
    batches of what arrived together."""
    sent = 0
    while True:
        batch, done = _next_batch(command, sent)
        sent += len(batch)
        if batch:
            yield batch
        elif done:
            return


def _next_batch(command: Command, sent: int) -> tuple[list[dict[str, Any]], bool]:
    """Records past the first ``sent`` (waiting for one), and whether the command is done."""
    with command.cond:
        command.cond.wait_for(lambda: len(command.logs) > sent or command.done)
        return command.logs[sent:], command.done


def _run_records(command: Command) -> Iterator[list[dict[str, Any]]]:
    yield [{"command": command.payload()}]
    yield from _log_records(command)
    yield [{"command": command.payload()}]


Action = Callable[[Handler, dict[str, str], dict[str, str], Any], None]
ROUTES: list[tuple[str, str, Action]] = [
    (r"/v3/sandboxes", "POST", Handler.create),
    (r"/v2/sandboxes", "GET", Handler.query),
    (_S, "GET", Handler.session),
    (_S + "/stop", "POST", Handler.stop),
    (_S + "/extend-timeout", "POST", Handler.extend),
    (_S + "/cmd", "POST", Handler.run),
    (_S + "/cmd", "GET", Handler.commands),
    (_C, "GET", Handler.get_command),
    (_C + "/logs", "GET", Handler.logs),
    (_C + "/kill", "POST", Handler.kill),
    (_C + "/stdin", "POST", Handler.stdin),
    (_S + "/fs/read", "POST", Handler.read),
    (_S + "/fs/write", "POST", Handler.write),
    (_S + "/fs/mkdir", "POST", Handler.mkdir),
    (r"/v2/sandboxes/(?P<name>[^/]+)", "GET", Handler.get),
    (r"/v2/sandboxes/(?P<name>[^/]+)", "DELETE", Handler.destroy),
    (r"/v2/sandboxes/(?P<name>[^/]+)", "PATCH", Handler.update),
]
