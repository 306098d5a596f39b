"""Every call sbx makes into the ``modal`` SDK, in one place (a renamed SDK call is one line here),
but for the session shell's stdin and stdout, which :mod:`.stdio` speaks below the SDK's
public API to the exec's task command router.

The SDK is asyncio code behind ``synchronicity``: its blocking API hops to a
loop of its own in a daemon thread. sbx runs the SDK's ``.aio`` coroutines
directly *on that loop* (:func:`sdk_loop`), which gives every control-plane
call a real deadline (cancellation reaches the RPC) and lets the session
shell's stdout pump and stdin writer live there without a second loop.

Errors leave this module as sbx errors (:func:`translate`), one line each,
never carrying a credential: missing credentials, rejected credentials,
unreachable API, quota, not found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import threading
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import modal
import modal.exception as modal_errors
from modal._utils.async_utils import synchronizer  # the SDK's own event loop (private)
from modal.config import config as modal_config
from modal.stream_type import StreamType

from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxDead,
    SandboxError,
    SandboxNotFound,
    ServiceUnreachable,
)

from .config import ModalConfig

T = TypeVar("T")
PINNED_MINOR = "1.6"
"""The ``modal`` minor version this adapter (and the test fake) is written against."""

Sandbox = Any  # modal.Sandbox (synchronicity-wrapped: untyped for mypy)
Process = Any  # modal.container_process.ContainerProcess


def sdk_version() -> str:
    return str(modal.__version__)


def sdk_loop() -> asyncio.AbstractEventLoop:
    """The event loop the SDK runs its coroutines on (started on first use)."""
    return synchronizer._get_loop(start=True)


def one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def translate(exc: BaseException, doing: str) -> SandboxError:
    """The sbx error for an SDK failure while ``doing`` something."""
    message = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, SandboxError):
        return exc
    if isinstance(exc, modal_errors.AuthError):
        return AuthenticationFailed(
            f"Modal rejected the credentials while {doing}: {message} "
            "(check MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or SBX_MODAL_TOKEN_*)"
        )
    if isinstance(exc, modal_errors.ResourceExhaustedError):
        return QuotaExceeded(f"Modal quota or capacity exhausted while {doing}: {message}")
    if isinstance(exc, modal_errors.NotFoundError):
        return SandboxNotFound(f"not found at Modal while {doing}: {message}")
    if isinstance(exc, modal_errors.ConflictError):
        return SandboxDead(f"the sandbox has finished ({doing}): {message}")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, modal_errors.TimeoutError)):
        return ServiceUnreachable(f"Modal did not answer in time while {doing}")
    if isinstance(exc, (ConnectionError, OSError, modal_errors.ServiceError)):
        return ServiceUnreachable(f"Modal API unreachable while {doing}: {message}")
    return SandboxError(f"Modal error while {doing}: {type(exc).__name__}: {message}")


def run(coro: Coroutine[Any, Any, T], timeout: float, doing: str) -> T:
    """Run ``coro`` on the SDK's loop with a deadline; SDK errors become sbx errors.

    Never call this from the SDK's loop itself.
    """
    future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), sdk_loop())
    try:
        return future.result()
    except concurrent.futures.CancelledError as exc:
        raise ServiceUnreachable(f"Modal call cancelled while {doing}") from exc
    except Exception as exc:
        raise translate(exc, doing) from exc


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the SDK's loop without waiting for it."""
    return asyncio.run_coroutine_threadsafe(coro, sdk_loop())


# -- credentials and the client ----------------------------------------------------------


def server_url() -> str:
    return str(modal_config["server_url"])


def credentials(config: ModalConfig) -> tuple[str, str]:
    """``(token_id, token_secret)`` from sbx's settings, else the SDK's env/profile.

    Raises :class:`CredentialsMissing` (naming what to set, never a value)."""
    if config.token_id is not None and config.token_secret is not None:
        return config.token_id.get_secret_value(), config.token_secret.get_secret_value()
    token_id, token_secret = modal_config.get("token_id"), modal_config.get("token_secret")
    if token_id and token_secret:
        return str(token_id), str(token_secret)
    raise CredentialsMissing(
        "Modal credentials missing: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET "
        "(or SBX_MODAL_TOKEN_ID/SBX_MODAL_TOKEN_SECRET), or run `modal token new`"
    )


def check_reachable(url: str, timeout: float) -> None:
    """Open (and close) a TCP connection to the API; :class:`ServiceUnreachable` if it fails.

    The SDK itself retries a refused connection for about a minute; this answers at once."""
    parsed = urllib.parse.urlparse(url.split(",")[0].strip())
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
            pass
    except OSError as exc:
        why = one_line(str(exc)) or type(exc).__name__
        raise ServiceUnreachable(
            f"Modal API at {parsed.hostname}:{port} unreachable: {why}"
        ) from exc


@dataclass(frozen=True)
class _ClientKey:
    url: str
    token_id: str
    secret_hash: int


_clients: dict[_ClientKey, Any] = {}
_clients_lock = threading.Lock()


def client(config: ModalConfig) -> Any:
    """A connected ``modal.Client`` for these credentials and the current API address."""
    token_id, token_secret = credentials(config)
    key = _ClientKey(server_url(), token_id, hash(token_secret))
    with _clients_lock:
        cached = _clients.get(key)
    if cached is not None:
        return cached
    check_reachable(key.url, config.connect_timeout)
    made = run(
        modal.Client.from_credentials.aio(token_id, token_secret),
        config.connect_timeout + 5,
        "connecting to Modal",
    )
    with _clients_lock:
        return _clients.setdefault(key, made)


def forget_clients() -> None:
    """Drop cached clients (after the API address or credentials changed; tests)."""
    with _clients_lock:
        _clients.clear()


# -- apps, images, sandboxes (coroutines: run them with :func:`run`) -------------------------


async def app(config: ModalConfig, client: Any) -> Any:
    return await modal.App.lookup.aio(
        config.app_name,
        create_if_missing=True,
        environment_name=config.environment_name,
        client=client,
    )


def image(config: ModalConfig) -> Any:
    if config.image_name:
        return modal.Image.from_name(config.image_name, environment_name=config.environment_name)
    return modal.Image.from_registry(config.image)


async def hello(client: Any) -> None:
    """One authenticated round trip (the API checks the credentials)."""
    await client.hello.aio()


async def create(
    config: ModalConfig, client: Any, *, name: str, tags: dict[str, str]
) -> Sandbox | None:
    """``Sandbox.create`` with the hardened settings of ``config``; None when a running
    sandbox already has ``name`` (another worker created it first)."""
    try:
        return await _create(config, client, name=name, tags=tags)
    except modal_errors.AlreadyExistsError:
        return None


async def _create(config: ModalConfig, client: Any, *, name: str, tags: dict[str, str]) -> Sandbox:
    return await modal.Sandbox.create.aio(
        app=await app(config, client),
        image=image(config),
        name=name,
        tags=tags,
        env=dict(config.env) or None,
        timeout=config.timeout,
        idle_timeout=config.idle_timeout,
        workdir=config.workdir,
        cpu=(config.cpu, config.cpu),
        memory=(config.memory, config.memory),
        region=config.region,
        block_network=config.block_network,
        outbound_cidr_allowlist=_listed(config.outbound_cidr_allowlist),
        outbound_domain_allowlist=_listed(config.outbound_domain_allowlist),
        client=client,
    )


def _listed(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


async def from_name(config: ModalConfig, client: Any, name: str) -> Sandbox | None:
    """The app's sandbox called ``name``: the running one, else its last terminated one."""
    try:
        return await modal.Sandbox.from_name.aio(
            config.app_name,
            name,
            environment_name=config.environment_name,
            include_terminated=True,
            client=client,
        )
    except modal_errors.NotFoundError:
        return None


async def from_id(client: Any, sandbox_id: str) -> Sandbox | None:
    try:
        return await modal.Sandbox.from_id.aio(sandbox_id, client=client)
    except modal_errors.NotFoundError:
        return None


async def finished(sandbox: Sandbox) -> bool:
    """True once the sandbox has ended (terminated, timed out, failed)."""
    if sandbox.returncode is not None:
        return True
    return await sandbox.poll.aio() is not None


async def terminate(sandbox: Sandbox) -> None:
    with contextlib.suppress(modal_errors.NotFoundError):
        await sandbox.terminate.aio()
    await sandbox.detach.aio()


async def detach(sandbox: Sandbox) -> None:
    await sandbox.detach.aio()


async def listing(config: ModalConfig, client: Any, tags: dict[str, str]) -> AsyncIterator[Sandbox]:
    """Running sandboxes of the configured app carrying at least ``tags``."""
    the_app = await app(config, client)
    async for sandbox in modal.Sandbox.list.aio(app_id=the_app.app_id, tags=tags, client=client):
        yield sandbox


async def get_tags(sandbox: Sandbox) -> dict[str, str]:
    return dict(await sandbox.get_tags.aio())


async def set_tags(sandbox: Sandbox, tags: dict[str, str]) -> None:
    await sandbox.set_tags.aio(tags)


# -- processes ---------------------------------------------------------------------------


async def exec_process(sandbox: Sandbox, argv: list[str]) -> Process:
    """``sb.exec(*argv)``: stdout as bytes, stderr discarded (sbx's scripts merge what they
    need into stdout)."""
    return await sandbox.exec.aio(*argv, text=False, stderr=StreamType.DEVNULL)


def exec_router(process: Process) -> tuple[Any, str, str]:
    """``(task command router client, task id, exec id)`` of an exec, for :mod:`.stdio`.
    Private SDK attributes: pinned version, see the tests."""
    # The SDK's own _ContainerProcess behind the synchronicity wrapper.
    raw: Any = synchronizer._translate_in(process)  # type: ignore[no-untyped-call]
    return raw._command_router_client, raw._task_id, raw._process_id


_STDIN_CHUNK = 1 << 20
"""Bytes buffered per ``drain``: the SDK's writer refuses more than 16 MiB between drains
(``BufferError``), and each drain is one RPC, kept well under gRPC's message limits."""


async def write_stdin(process: Process, data: bytes, *, eof: bool = False) -> None:
    """Write all of ``data`` (any size) to the exec's stdin, in order; then EOF if asked."""
    view = memoryview(data)
    for start in range(0, len(view), _STDIN_CHUNK):
        process.stdin.write(view[start : start + _STDIN_CHUNK])
        await process.stdin.drain.aio()
    if eof:
        process.stdin.write_eof()
    if eof or not data:
        await process.stdin.drain.aio()


async def wait(process: Process) -> int:
    return int(await process.wait.aio())


async def run_process(sandbox: Sandbox, argv: list[str], stdin: bytes | None) -> tuple[int, bytes]:
    """Run ``argv`` to its end: ``(exit status, stdout)``; ``stdin`` (with EOF) when given."""
    process = await exec_process(sandbox, argv)
    steps: list[Awaitable[Any]] = [process.stdout.read.aio(), wait(process)]
    if stdin is not None:
        steps.append(write_stdin(process, stdin, eof=True))
    results = await asyncio.gather(*steps)
    return int(results[1]), bytes(results[0])
