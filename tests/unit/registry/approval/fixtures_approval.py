"""Fixtures of the approval tests: a clock, a real redis-server, a real judge HTTP server,
stores (memory and Redis) and guards over a config file.

Registered for this directory by its ``conftest.py``; test modules ask for
them by name (``write_config`` is imported: a plain helper).
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry.approval import ApprovalConfigSource, ApprovalGuard, MemoryApprovalStore
from registry.approval.redis_store import RedisApprovalStore
from registry.approval.store import ApprovalStore
from tests.helpers import redis_server as helper_redis_server


class FakeClock:
    """Injectable wall clock: tests move time explicitly instead of sleeping."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """URL of a private redis-server for this test session (the suite's helper)."""
    with helper_redis_server() as url:
        yield url


@pytest.fixture
def redis_client(redis_server: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(redis_server)
    client.flushall()
    yield client
    client.close()


class JudgeServer:
    """Loopback OpenAI-compatible endpoint whose behaviour a test sets per request."""

    def __init__(self) -> None:
        self.mode = "approve"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.release = threading.Event()  # lets a "slow" handler finish at teardown
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append({"path": self.path, "body": None})
                server.headers.append(dict(self.headers.items()))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                server.requests.append({"path": self.path, "body": body})
                server.headers.append(dict(self.headers.items()))
                mode = server.mode
                if mode == "slow":
                    server.release.wait(30)
                    return
                if mode == "http500":
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"boom")
                    return
                if mode == "redirect":
                    # 303 is the redirect urllib would follow for a POST (as a GET).
                    self.send_response(303)
                    self.send_header("Location", f"http://127.0.0.1:{server.port}/stolen")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                text = {
                    "approve": "APPROVE: only deletes a build dir",
                    "deny": "DENY - destructive",
                    "garbage": "I think maybe?",
                    "lower": "  **approve**",
                }.get(mode, "")
                if mode == "badjson":
                    payload = b"{not json"
                else:
                    payload = json.dumps(
                        {"choices": [{"message": {"role": "assistant", "content": text}}]}
                    ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    server = JudgeServer()
    yield server
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["memory", "redis"])
def make_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], ApprovalStore]]:
    """Factory of stores sharing one backend (two Redis stores = two workers)."""
    if request.param == "memory":
        shared = MemoryApprovalStore()
        yield lambda: shared
        return
    client = request.getfixturevalue("redis_client")
    yield lambda: RedisApprovalStore(client, prefix="t:")


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config.yaml"


def write_config(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(doc))


@pytest.fixture
def guard_factory(
    make_store: Callable[[], ApprovalStore], config_path: Path, clock: Any
) -> Callable[..., ApprovalGuard]:
    def build(doc: dict[str, Any] | None = None, **kwargs: Any) -> ApprovalGuard:
        if doc is not None:
            write_config(config_path, doc)
        return ApprovalGuard(
            store=make_store(), config=ApprovalConfigSource(config_path), clock=clock, **kwargs
        )

    return build
