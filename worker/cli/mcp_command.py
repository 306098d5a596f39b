"""``sbx mcp``: serve the worker's tools to MCP clients (stdio, or streamable HTTP)."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from worker.settings import get_settings

from .commands import cli_session_id
from .output import EXIT_OK, EXIT_USAGE, fail

DEFAULT_PORT = 7620


def cmd_mcp(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        fail("the MCP SDK is not installed: pip install 'sbx[mcp]'", EXIT_USAGE)
    import anyio

    settings = get_settings()
    toolsets = args.toolsets.split(",") if args.toolsets else None
    if args.transport == "http":
        from worker.mcp_server.http import serve_http

        anyio.run(lambda: serve_http(settings, host=args.host, port=args.port,
                                     backend=args.backend, toolsets=toolsets))  # fmt: skip
        return EXIT_OK
    from worker.mcp_server.identity import configured_identity
    from worker.mcp_server.server import serve_stdio

    session_id = args.session or cli_session_id(settings)
    token = settings.session_token if session_id == settings.session_id else None
    identity = configured_identity(session_id, token.get_secret_value() if token else None)
    anyio.run(lambda: serve_stdio(settings, identity, backend=args.backend, toolsets=toolsets))
    return EXIT_OK


def add_mcp_command(sub: Any) -> None:
    """Register ``sbx mcp`` on ``sub`` (an argparse sub-parser action)."""
    p = sub.add_parser("mcp", help="serve the worker's tools to MCP clients")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on (loopback)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="HTTP: port (0: any free one)")
    p.add_argument("--backend", help="backend of every call (default: SBX_BACKEND)")
    p.add_argument("--toolsets", help="comma-separated toolsets to serve (default: all)")
    p.add_argument("--session", help="stdio: the session (default: SBX_SESSION_ID)")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_mcp)
