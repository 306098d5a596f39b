"""The fake Daytona's control plane: ``/api/sandbox...`` as the SDK's generated client calls it.

Answers use Daytona's shapes (``Sandbox`` and ``SandboxListItem`` DTOs, the
``{statusCode, error, message}`` error envelope). Sandboxes start, stop and
archive synchronously: the answer already carries the final state, so the SDK
never needs its event stream (the fake has no socket.io endpoint; the SDK falls
back to polling, which it then does not need).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .store import ApiError, FakeSandbox

if TYPE_CHECKING:
    from .server import FakeDaytona

Handler = Callable[[web.Request], Awaitable[web.Response]]


def routes(fake: FakeDaytona) -> list[web.RouteDef]:
    """The API routes, under ``/api``."""

    def one(request: web.Request) -> FakeSandbox:
        return fake.store.find(request.match_info["sandbox"])

    def dto(sandbox: FakeSandbox) -> web.Response:
        return web.json_response(sandbox.dto(fake.toolbox_url))

    async def create(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        fake.creates.append(body)
        injected = fake.take_create_error()
        if injected is not None:
            error, created = injected
            if created:
                await fake.blocking(fake.store.create, body)
            raise error
        sandbox = await fake.blocking(fake.store.create, body)
        return dto(sandbox)

    async def list_sandboxes(request: web.Request) -> web.Response:
        labels = json.loads(request.query.get("labels") or "{}")
        found = fake.store.matching(labels)
        states = request.query.getall("states", [])
        if states:
            found = [s for s in found if s.state in states]
        start = int(request.query.get("cursor") or 0)
        limit = int(request.query.get("limit") or 100)
        page = found[start : start + limit]
        more = start + limit < len(found)
        return web.json_response(
            {
                "items": [s.list_item(fake.toolbox_url) for s in page],
                "nextCursor": str(start + limit) if more else None,
            }
        )

    async def get(request: web.Request) -> web.Response:
        return dto(one(request))

    def acting(operation: Callable[[FakeSandbox], None]) -> Handler:
        """A handler that applies ``operation`` (off the event loop) and answers the DTO."""

        async def handler(request: web.Request) -> web.Response:
            sandbox = one(request)
            await fake.blocking(operation, sandbox)
            return dto(sandbox)

        return handler

    async def last_activity(request: web.Request) -> web.Response:
        fake.store.refresh_activity(one(request))
        return web.Response(status=201)

    async def toolbox_proxy_url(request: web.Request) -> web.Response:
        one(request)
        return web.json_response({"url": fake.toolbox_url})

    return [
        web.post("/api/sandbox", create),
        web.get("/api/sandbox", list_sandboxes),
        web.get("/api/sandbox/{sandbox}", get),
        web.delete("/api/sandbox/{sandbox}", acting(fake.store.delete)),
        web.post("/api/sandbox/{sandbox}/start", acting(fake.store.start)),
        web.post("/api/sandbox/{sandbox}/stop", acting(fake.store.stop)),
        web.post("/api/sandbox/{sandbox}/archive", acting(fake.store.archive)),
        web.post("/api/sandbox/{sandbox}/last-activity", last_activity),
        web.get("/api/sandbox/{sandbox}/toolbox-proxy-url", toolbox_proxy_url),
    ]


def error_response(request: web.Request, error: ApiError) -> web.Response:
    """Daytona's error envelope."""
    return web.json_response(
        {
            "path": request.path_qs,
            "statusCode": error.status,
            "error": HTTPStatus(error.status).phrase,
            "message": error.message,
        },
        status=error.status,
    )
