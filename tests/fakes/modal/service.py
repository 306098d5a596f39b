"""The fake Modal service: its state, its two gRPC servers, and the knobs tests turn.

:class:`FakeModal` runs, on one event loop in a daemon thread, the control
plane (:mod:`.control`, what ``MODAL_SERVER_URL`` points at) and the task
command router (:mod:`.router`, whose URL the control plane hands out), both
on 127.0.0.1. Every request is recorded (method name and a copy of the
message) so tests can assert what the SDK sent. Tests can make sandbox
creation fail with a quota error, terminate a sandbox behind the client's
back, lose the reply to a create, and publish named images.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message
from grpclib import GRPCError, Status
from grpclib.server import Server, Stream
from modal_proto import api_pb2

from .jail import Jail

T = TypeVar("T")
TOKEN_ID = "ak-sbx-fake-token-id"
TOKEN_SECRET = "as-sbx-fake-token-secret"


def fake_jwt(subject: str, lifetime: float = 3600.0) -> str:
    """An unsigned JWT whose ``exp`` the SDK reads (it never verifies the signature)."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    claims = {"sub": subject, "exp": int(time.time() + lifetime), "nonce": secrets.token_hex(4)}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.fake"


@dataclass(eq=False)
class FakeSandbox:
    """A sandbox as the fake control plane knows it."""

    sandbox_id: str
    task_id: str
    app_id: str
    name: str
    tags: dict[str, str]
    definition: api_pb2.Sandbox
    created_at: float
    jail: Jail
    jwt: str
    result: api_pb2.GenericResult | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.result is None

    def info(self) -> api_pb2.SandboxInfo:
        return api_pb2.SandboxInfo(
            id=self.sandbox_id,
            created_at=self.created_at,
            app_id=self.app_id,
            name=self.name,
            tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in self.tags.items()],
            task_info=api_pb2.TaskInfo(id=self.task_id, result=self.result),
            metadata=api_pb2.SandboxHandleMetadata(app_id=self.app_id),
        )


class FakeModal:
    """The fake Modal control plane and task command router; see the module docstring."""

    def __init__(self) -> None:
        self.token_id = TOKEN_ID
        self.token_secret = TOKEN_SECRET
        self.quota_exceeded = False
        """When True, sandbox creation answers RESOURCE_EXHAUSTED (a workspace quota)."""
        self.create_hangs = False
        """When True, a sandbox is created but the create call never answers (a lost reply)."""
        self.stdin_streams = True
        """When False, ``TaskExecStdinWriteStream`` answers UNIMPLEMENTED (an older router)."""
        self.lose_stdin_messages = 0
        """This many stdin stream messages are dropped unapplied, each ending its stream."""
        self.named_images: dict[str, str] = {}
        """Published images: ``name:tag`` -> image id (``Image.from_name``)."""
        self.apps: dict[str, str] = {}
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.requests: list[tuple[str, Message | None]] = []
        self.directory = Path(tempfile.mkdtemp(prefix="sbx-fake-modal-"))
        self.server_url = ""
        self.router_url = ""
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-modal", daemon=True
        )
        self._servers: list[Server] = []

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeModal:
        """Start both servers on free ports of 127.0.0.1."""
        from .control import ControlPlane
        from .router import Router

        self._thread.start()

        async def serve() -> tuple[int, int]:
            ports = []
            servicer: type[ControlPlane] | type[Router]
            for servicer in (ControlPlane, Router):
                server = Server([servicer(self)])
                await server.start("127.0.0.1", 0)
                self._servers.append(server)
                sockets = getattr(server._server, "sockets", None) or []
                ports.append(int(sockets[0].getsockname()[1]))
            return ports[0], ports[1]

        control, router = self.run(serve())
        self.server_url = f"http://127.0.0.1:{control}"
        self.router_url = f"http://127.0.0.1:{router}"
        return self

    def stop(self) -> None:
        """Kill every sandbox, close the servers, remove the fake's files."""

        async def shutdown() -> None:
            for sandbox in list(self.sandboxes.values()):
                await self.terminate(sandbox, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
            for server in self._servers:
                server.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(server.wait_closed(), 5)

        with contextlib.suppress(Exception):
            self.run(shutdown(), timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the fake's loop from another thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- records -----------------------------------------------------------------------

    def record(self, method: str, request: Message | None) -> None:
        copy = None
        if request is not None:
            copy = type(request)()
            copy.CopyFrom(request)
        with self._lock:
            self.requests.append((method, copy))

    def requests_of(self, method: str) -> list[Any]:
        """The recorded requests of one RPC, oldest first."""
        with self._lock:
            return [r for m, r in self.requests if m == method]

    def stdin_sent(self) -> bytes:
        """Every byte the SDK sent to any exec's stdin, unary writes and streams alike."""
        with self._lock:
            requests = list(self.requests)
        return b"".join(
            r.data
            for m, r in requests
            if r is not None and m in ("TaskExecStdinWrite", "TaskExecStdinWriteStream")
        )

    def new_id(self, prefix: str, suffix: str = "") -> str:
        # Not 22 characters after the prefix: the SDK treats such sandbox ids as V1.
        return f"{prefix}-{next(self._ids):04d}{secrets.token_hex(10)}{suffix}"

    # -- sandboxes ---------------------------------------------------------------------

    def running(self) -> list[FakeSandbox]:
        return [s for s in self.sandboxes.values() if s.running]

    def by_task(self, task_id: str) -> FakeSandbox:
        for sandbox in self.sandboxes.values():
            if sandbox.task_id == task_id and sandbox.running:
                return sandbox
        raise GRPCError(Status.NOT_FOUND, f"task {task_id} not found")

    def get(self, sandbox_id: str) -> FakeSandbox:
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return sandbox

    async def create_sandbox(self, app_id: str, definition: api_pb2.Sandbox,
                             tags: dict[str, str], env: dict[str, str]) -> FakeSandbox:  # fmt: skip
        sandbox_id = self.new_id("sb")
        jail = Jail(
            self.directory / sandbox_id,
            hostname=sandbox_id,
            workdir=definition.workdir,
            block_network=definition.network_access.network_access_type
            == api_pb2.NetworkAccess.NetworkAccessType.BLOCKED,
            env=env,
        )
        await jail.start()
        sandbox = FakeSandbox(
            sandbox_id=sandbox_id,
            task_id=self.new_id("ta", "V"),
            app_id=app_id,
            name=definition.name,
            tags=tags,
            definition=definition,
            created_at=time.time() + next(self._ids) * 1e-6,
            jail=jail,
            jwt=fake_jwt(sandbox_id),
        )
        self.sandboxes[sandbox_id] = sandbox
        if definition.timeout_secs:
            asyncio.get_running_loop().call_later(
                definition.timeout_secs,
                lambda: asyncio.ensure_future(
                    self.terminate(sandbox, api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT)
                ),
            )
        return sandbox

    async def terminate(self, sandbox: FakeSandbox, status: int) -> None:
        if not sandbox.running:
            return
        sandbox.result = api_pb2.GenericResult(status=status)  # type: ignore[arg-type]
        await sandbox.jail.stop()
        sandbox.finished.set()

    def terminate_behind_the_back(self, sandbox_id: str) -> None:
        """End a sandbox as the Modal dashboard, a timeout or an outage would."""
        self.run(
            self.terminate(self.get(sandbox_id), api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
        )

    def cut_streams(self) -> int:
        """End every open stdin and stdout stream of every exec with UNAVAILABLE, as a
        router restart would (the execs keep running); returns how many were cut."""

        from .router import cut

        async def cut_all() -> int:
            tasks = []
            for sandbox in self.running():
                for run in sandbox.jail.execs.values():
                    tasks += list(run.stdout_readers)
                    if run.stdin_stream is not None:
                        tasks.append(run.stdin_stream)
            for task in tasks:
                cut(task)
            return len(tasks)

        return self.run(cut_all())

    def sandboxes_of_session(self, session_id: str, *, running: bool = True) -> list[FakeSandbox]:
        return [
            s
            for s in self.sandboxes.values()
            if s.tags.get("sbx.session") == session_id and (s.running or not running)
        ]

    # -- authentication ----------------------------------------------------------------

    def check_client(self, stream: Stream[Any, Any]) -> None:
        """The control plane's token check (the SDK sends the pair with every call)."""
        metadata: Mapping[str, Any] = stream.metadata or {}
        if (
            metadata.get("x-modal-token-id") != self.token_id
            or metadata.get("x-modal-token-secret") != self.token_secret
        ):
            raise GRPCError(Status.UNAUTHENTICATED, "Token validation failed: invalid token")

    def check_router(self, stream: Stream[Any, Any], task_id: str) -> FakeSandbox:
        """The task command router's JWT check; returns the task's running sandbox."""
        sandbox = self.by_task(task_id)
        metadata: Mapping[str, Any] = stream.metadata or {}
        if metadata.get("authorization") != f"Bearer {sandbox.jwt}":
            raise GRPCError(Status.UNAUTHENTICATED, "invalid or expired token")
        return sandbox


def unimplemented_rest(cls: type[T]) -> type[T]:
    """Give every RPC of a generated servicer base that ``cls`` does not implement a
    handler answering UNIMPLEMENTED (and recording the call), so the class can be
    instantiated and an SDK call the fake does not know fails loudly."""

    def handler(name: str) -> Any:
        async def unimplemented(self: Any, stream: Stream[Any, Any]) -> None:
            self.service.record(name, None)
            raise GRPCError(Status.UNIMPLEMENTED, f"the fake Modal does not implement {name}")

        return unimplemented

    for name in getattr(cls, "__abstractmethods__", ()):
        setattr(cls, name, handler(name))
    cls.__abstractmethods__ = frozenset()  # type: ignore[attr-defined]
    return cls
