"""The fake Daytona service: API and toolbox on one HTTP server on 127.0.0.1.

It runs on its own event loop thread, so tests (and a worker process pointed at
its URL) use it through the real SDK exactly as they would use Daytona. Tests
also reach behind the SDK's back through this object: read what was requested
(:attr:`FakeDaytona.creates`, ...), stop, archive or delete a sandbox, inject a
create error, move the lifecycle clock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from . import api, pty, toolbox
from .store import ApiError, FakeSandbox, Store

T = TypeVar("T")

FAKE_TOKEN = "dtn_sbx_fake_0123456789abcdef"
"""The one API key the fake accepts (as ``Authorization: Bearer ...``)."""
SDK_VERSION = "0.226.1"
"""The version of the ``daytona`` SDK whose wire protocol this fake implements."""


class FakeDaytona:
    """A running fake; :meth:`close` stops it and every sandbox it holds."""

    def __init__(self, root: Path | None = None, token: str = FAKE_TOKEN) -> None:
        self.token = token
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="sbx-fake-daytona-"))
        self.store = Store(self.root)
        self.creates: list[dict[str, Any]] = []
        self.executes: list[dict[str, Any]] = []
        self.pty_opens: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.sessions: dict[str, dict[str, toolbox.Session]] = {}
        self.ptys: dict[str, dict[str, pty.PtySession]] = {}
        self._create_errors: list[tuple[ApiError, bool]] = []
        self.failing: dict[str, int] = {}
        """Requests whose path ends with a key are answered with its status (5xx: an outage)."""
        self._pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="fake-daytona")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- running -----------------------------------------------------------------

    def start(self) -> FakeDaytona:
        self._thread.start()
        self._run(self._serve())
        return self

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=1 << 30)
        app.add_routes(api.routes(self) + toolbox.routes(self) + pty.routes(self))
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    def close(self) -> None:
        """Stop serving, kill every sandbox's processes and remove their files."""
        if self._runner is not None:
            self._run(self._runner.cleanup())
            self._runner = None
        self.store.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=False)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking store operation (starting or killing a jail) off the event loop."""
        return await self._loop.run_in_executor(self._pool, fn, *args)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return api.error_response(request, ApiError(401, "Invalid credentials"))
        for suffix, status in list(self.failing.items()):
            if request.path.endswith(suffix):
                return api.error_response(request, ApiError(status, "injected failure"))
        try:
            return await handler(request)
        except ApiError as error:
            return api.error_response(request, error)
        except web.HTTPNotFound:
            missing = ApiError(404, f"Cannot {request.method} {request.path}")
            return api.error_response(request, missing)

    # -- URLs ----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def toolbox_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/toolbox"

    # -- behind the SDK's back -------------------------------------------------------

    def sandbox(self, id_or_name: str) -> FakeSandbox:
        """The live sandbox with this id or name (``ApiError`` 404 if there is none)."""
        return self.store.find(id_or_name)

    def stop(self, id_or_name: str) -> None:
        """Stop a sandbox as Daytona's auto-stop would: its processes die, files stay."""
        self.store.stop(self.sandbox(id_or_name))

    def archive(self, id_or_name: str) -> None:
        sandbox = self.sandbox(id_or_name)
        self.store.stop(sandbox)
        self.store.archive(sandbox)

    def delete(self, id_or_name: str) -> None:
        self.store.delete(self.sandbox(id_or_name))

    def advance(self, seconds: float) -> list[tuple[str, str]]:
        """Move the lifecycle clock forward and apply auto-stop/archive/delete."""
        self.store.clock_offset += seconds
        return self.store.apply_lifecycle()

    def inject_create_error(self, status: int, message: str, *, created: bool = False) -> None:
        """The next create is answered with this error (e.g. 400 for an exhausted quota);
        with ``created`` the sandbox is created first all the same (a failure half-way)."""
        self._create_errors.append((ApiError(status, message), created))

    def take_create_error(self) -> tuple[ApiError, bool] | None:
        return self._create_errors.pop(0) if self._create_errors else None
