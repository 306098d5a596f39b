"""``sbx mcp --transport http``: streamable HTTP on loopback (``http://127.0.0.1:PORT/mcp``).

Every request must name its session in ``Authorization`` (see
:mod:`worker.mcp_server.identity`); one without is answered 401 before the MCP layer
sees it. Where this process holds the deployment's secret, the token is checked here
too (401 when wrong); elsewhere the worker checks it on every call (``denied``).
On loopback the SDK's DNS-rebinding protection is on (Host and Origin must be local).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import uvicorn

from process_registry.sessions import SessionSigner
from worker.identity import load_signer
from worker.mcp_server.identity import AuthError, identity_from_header
from worker.mcp_server.server import build_server, current_identity
from worker.mcp_server.sessions import SessionClients
from worker.settings import Settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MCP_PATH = "/mcp"

Scope = dict[str, Any]
ASGIApp = Any


class SessionAuth:
    """ASGI middleware: the request's session into :data:`current_identity`, or 401."""

    def __init__(self, app: ASGIApp, signer: SessionSigner | None) -> None:
        self.app = app
        self.signer = signer

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan events
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                header = value.decode("latin-1")
        try:
            identity = identity_from_header(header)
            if self.signer is not None and not self.signer.verify(
                identity.session_id, identity.token
            ):
                raise AuthError(f"wrong token for session {identity.session_id}")
        except AuthError as exc:
            await _unauthorized(send, str(exc))
            return
        token = current_identity.set(identity)
        try:
            await self.app(scope, receive, send)
        finally:
            current_identity.reset(token)


async def _unauthorized(send: Any, message: str) -> None:
    body = json.dumps({"error": message, "status": "denied"}).encode()
    await send({
        "type": "http.response.start",
        "status": 401,
        "headers": [(b"content-type", b"application/json"),
                    (b"www-authenticate", b'Basic realm="sbx", charset="UTF-8"')],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def local_signer(settings: Settings) -> SessionSigner | None:
    """The deployment's signer when this process can read its secret, else None."""
    if settings.secret_key is not None or settings.secret_path.exists():
        return load_signer(settings)
    return None


def build_app(
    settings: Settings,
    clients: SessionClients,
    *,
    host: str = "127.0.0.1",
    toolsets: Sequence[str] | None = None,
) -> ASGIApp:
    """The ASGI app: the SDK's streamable HTTP app at ``/mcp`` behind :class:`SessionAuth`."""
    server = build_server(settings, clients, toolsets=toolsets)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return SessionAuth(app, local_signer(settings))


class _Uvicorn(uvicorn.Server):
    """uvicorn that says where it listens, once it does (``--port 0`` picks a free port)."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started and self.servers:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            sys.stderr.write(f"sbx mcp: serving http://{shown}:{port}{MCP_PATH}\n")
            sys.stderr.flush()


async def serve_http(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    backend: str | None = None,
    toolsets: Sequence[str] | None = None,
) -> None:
    """Serve until interrupted (SIGINT/SIGTERM); every session's client closed at the end."""
    if host not in LOOPBACK:
        sys.stderr.write(
            f"sbx mcp: WARNING: listening on {host}, beyond loopback: anyone who can reach "
            "it and holds a session token acts as that session; put TLS in front\n"
        )
    clients = SessionClients(settings, backend)
    app = build_app(settings, clients, host=host, toolsets=toolsets)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    try:
        await _Uvicorn(config).serve()
    finally:
        with anyio.CancelScope(shield=True):
            await clients.aclose()
