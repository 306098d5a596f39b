"""The one adapter between sbx and the ``vercel-sandbox`` SDK: every SDK call is made here.

The SDK is renaming ``run_process``/``create_process`` to ``run_command``/
``create_command``; only :meth:`VercelApi.run` and :meth:`VercelApi.start_shell`
name them. Every SDK error leaves this module as an sbx error with one line that
never contains a credential (:func:`.errors.translating`).

Reading a live process's output needs the SDK's log stream itself: its public
readers block until a newline or a character count, which sentinel framing
cannot use. :meth:`VercelApi.logs` iterates ``SandboxService.process_logs`` the
way the SDK's own sync readers do (``iter_coroutine``); that reach into
non-public names is why the SDK version is pinned and checked by a test.

The session shell's two per-call endpoints are spoken directly, stdin by :mod:`.wire`
and the log stream by :mod:`.logfeed` (at :meth:`VercelApi.base_url`, with these
credentials); this module stays the only one that calls the SDK.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
from vercel._internal.core.iter_coroutine import iter_coroutine
from vercel.errors import VercelSessionClosedError
from vercel.oidc import decode_oidc_payload
from vercel.sandbox import (
    NetworkPolicy,
    SandboxApiError,
    SandboxCredentials,
    SandboxError,
    SandboxPathNotFoundError,
    SandboxQueryByName,
    SandboxResources,
    SandboxStatus,
    SandboxStreamError,
    TagFilter,
)
from vercel.sandbox.sync import SandboxServiceOptions as SyncServiceOptions
from vercel.sandbox.sync import SyncProcess, SyncSandbox, SyncSandboxClient

from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxNotFound,
)
from environments.errors import SandboxError as SbxSandboxError

from .config import VercelConfig
from .errors import translating
from .within import within

SDK_VERSION = "0.10.0"
"""The ``vercel-sandbox`` version this adapter and the test fake were written against."""
STOPPED = frozenset(
    {
        SandboxStatus.STOPPED,
        SandboxStatus.STOPPING,
        SandboxStatus.FAILED,
        SandboxStatus.ABORTED,
        SandboxStatus.SNAPSHOTTING,
    }
)

Sandbox = SyncSandbox
Process = SyncProcess


def resolve_credentials(
    config: VercelConfig, environ: Mapping[str, str] | None = None
) -> SandboxCredentials:
    """Credentials from the config, else (``read_vercel_env``) the SDK's own variables.

    Raises :class:`CredentialsMissing` (naming what to set, never a value)."""
    env: Mapping[str, str] = (
        (os.environ if environ is None else environ) if (config.read_vercel_env) else {}
    )
    team = config.team_id or env.get("VERCEL_TEAM_ID")
    project = config.project_id or env.get("VERCEL_PROJECT_ID")
    token = config.token.get_secret_value() if config.token else None
    oidc = config.oidc_token.get_secret_value() if config.oidc_token else None
    if token is None and oidc is None:
        oidc = env.get("VERCEL_OIDC_TOKEN") or None
        token = None if oidc else env.get("VERCEL_TOKEN") or None
    if token is None and oidc is not None:
        token = oidc
        if not (team and project):
            with contextlib.suppress(Exception):  # a malformed token: say what is missing below
                claims = decode_oidc_payload(oidc)
                team = team or claims.get("owner_id")
                project = project or claims.get("project_id")
    if token and team and project:
        return SandboxCredentials(token=token, team_id=str(team), project_id=str(project))
    raise CredentialsMissing(
        "no Vercel Sandbox credentials: set VERCEL_OIDC_TOKEN, or VERCEL_TOKEN with "
        "VERCEL_TEAM_ID and VERCEL_PROJECT_ID (or SBX_VERCEL_SANDBOX_TOKEN, _TEAM_ID, _PROJECT_ID)"
    )


@dataclass(frozen=True)
class SandboxInfo:
    """What the orphan sweep needs of a sandbox found by its tags."""

    name: str
    tags: dict[str, str]
    running: bool
    last_change_ms: int


_OWN_WAIT = 1.25
"""How much longer than a command's ``kill_after`` :meth:`VercelApi.run` waits for it."""


_clients: dict[tuple[str, ...], SyncSandboxClient] = {}
_clients_lock = threading.Lock()


def close_clients() -> None:
    """Close every cached SDK client (worker shutdown, tests)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        with contextlib.suppress(Exception):
            client.close()


class VercelApi:
    """The SDK calls of one configuration (one project, one set of credentials)."""

    def __init__(self, config: VercelConfig) -> None:
        self.config = config
        self.where = config.base_url or "the default endpoint"
        self._client: SyncSandboxClient | None = None

    @property
    def client(self) -> SyncSandboxClient:
        """A client per (endpoint, credentials), shared by every sandbox of this process."""
        if self._client is not None:
            return self._client
        creds = resolve_credentials(self.config)
        # The SDK's only telemetry: naming a detected coding agent in its User-Agent.
        os.environ.setdefault("VERCEL_TELEMETRY_DISABLED", "1")
        key = (
            self.config.base_url or "",
            hashlib.sha256(creds.token.encode()).hexdigest(),
            creds.team_id,
            creds.project_id,
            self.config.region or "",
        )
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                cfg = self.config
                options = SyncServiceOptions(
                    base_url=cfg.base_url, credentials_factory=lambda: creds, region=cfg.region
                )
                timeout = httpx2.Timeout(cfg.request_timeout, connect=cfg.connect_timeout)
                client = SyncSandboxClient.create(
                    options=options, httpx_client_factory=lambda: httpx2.Client(timeout=timeout)
                )
                _clients[key] = client
        self._client = client
        return client

    def base_url(self) -> str:
        """The API address the SDK sends requests to (its default when none is configured)."""
        return SyncServiceOptions(base_url=self.config.base_url).base_url

    # -- sandboxes --------------------------------------------------------------

    def find(self, name: str) -> Sandbox | None:
        """The sandbox called ``name`` without resuming it; ``None`` if there is none."""
        try:
            with translating(f"looking up sandbox {name}", self.where):
                return self.client.get_sandbox(name=name)
        except SandboxNotFound:
            return None

    def create(self, name: str, tags: dict[str, str]) -> Sandbox | None:
        """Create ``name`` with the configured image, limits and network policy; ``None``
        when a sandbox of that name exists already (another worker created it meanwhile).

        A create that fails after the service may have accepted it is destroyed again,
        so a failed create leaves nothing behind."""
        cfg = self.config
        policy = (
            NetworkPolicy.custom(allow={domain: () for domain in cfg.network_allow})
            if cfg.network_allow
            else NetworkPolicy.deny_all()
        )
        try:
            with translating(f"creating sandbox {name}", self.where):
                try:
                    return self.client.create_sandbox(
                        name=name,
                        image=cfg.image,
                        execution_time_limit=cfg.execution_time_limit,
                        resources=SandboxResources(vcpus=cfg.vcpus, memory=cfg.memory_mb),
                        persistent=cfg.persistent,
                        network_policy=policy,
                        env=dict(cfg.env),
                        tags=tags,
                        region=cfg.region,
                    )
                except SandboxApiError as exc:
                    if exc.status_code == 409:
                        return None  # not ours to clean up
                    raise
        except (SandboxNotFound, QuotaExceeded, AuthenticationFailed, CredentialsMissing):
            raise  # refused before anything was made
        except SbxSandboxError:
            with contextlib.suppress(SbxSandboxError):
                self.destroy(name)
            raise

    def resume(self, sandbox: Sandbox) -> None:
        """Start a new runtime session of a stopped sandbox (its files, if persistent, kept)."""
        with translating(f"resuming sandbox {sandbox.name}", self.where):
            sandbox.session()

    def stop(self, sandbox: Sandbox) -> None:
        with translating(f"stopping sandbox {sandbox.name}", self.where):
            sandbox.stop()

    def destroy(self, name: str) -> None:
        """Destroy ``name`` (and snapshots nothing else uses); gone already is fine."""
        with contextlib.suppress(SandboxNotFound), translating(f"destroying {name}", self.where):
            self.client.get_sandbox(name=name).destroy(delete_orphan_snapshots=True)

    def extend(self, sandbox: Sandbox, seconds: float) -> None:
        with translating(f"extending sandbox {sandbox.name}", self.where):
            sandbox.extend_execution_time_limit(seconds)

    def query(self, tag: tuple[str, str], name_prefix: str) -> list[SandboxInfo]:
        """Every sandbox of the project with tag ``tag`` and a name starting ``name_prefix``."""
        query = SandboxQueryByName(name_prefix=name_prefix, tag=TagFilter(key=tag[0], value=tag[1]))
        with translating("listing sandboxes", self.where):
            return [
                SandboxInfo(
                    name=sb.name,
                    tags=dict(sb.tags or {}),
                    running=sb.status not in STOPPED,
                    last_change_ms=max(
                        sb.created_at or 0, sb.updated_at or 0, sb.status_updated_at or 0
                    ),
                )
                for sb in self.client.query_sandboxes(query=query)
            ]

    @staticmethod
    def session_id(sandbox: Sandbox) -> str:
        return sandbox.current_session_id

    @staticmethod
    def is_stopped(sandbox: Sandbox) -> bool:
        return sandbox.status in STOPPED

    @staticmethod
    def deadline(sandbox: Sandbox) -> float | None:
        """Wall-clock second at which the current runtime session hits its time limit."""
        session = sandbox.current_session
        if session is None or session.started_at is None or session.execution_time_limit is None:
            return None
        return session.started_at / 1000 + session.execution_time_limit.total_seconds()

    # -- processes --------------------------------------------------------------

    def start_shell(self, sandbox: Sandbox, args: list[str]) -> Process:
        """``sh ARGS...`` with stdin piped: the session shell's process."""
        with translating(f"starting a shell in {sandbox.name}", self.where):
            return sandbox.create_process(
                "sh",
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def run(
        self,
        sandbox: Sandbox,
        command: str,
        args: list[str],
        stdin: bytes | None = None,
        *,
        kill_after: float | None = None,
    ) -> tuple[int, str]:
        """Run a command to completion: ``(exit code, stdout)`` (stderr dropped).

        With ``kill_after``, the service kills it that many seconds after it started, and
        this waits at most ``_OWN_WAIT`` times as long: raises ``TimeoutError`` then (a
        stalled stream, or a service that did not end it; the SDK's request goes on in a
        thread of its own until its connection ends)."""

        def call() -> tuple[int, str]:
            with translating(f"running a helper in {sandbox.name}", self.where):
                done = sandbox.run_process(
                    command, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    input=stdin, kill_after=kill_after,
                )  # fmt: skip
            return done.returncode, done.stdout or ""

        return call() if kill_after is None else within(call, kill_after * _OWN_WAIT)

    @staticmethod
    def write_stdin(process: Process, data: bytes) -> None:
        """Send ``data`` to ``process``; ``BrokenPipeError`` when it cannot take it."""
        try:
            assert process.stdin is not None
            process.stdin.write(data)
        except BrokenPipeError:
            raise
        except Exception as exc:
            raise BrokenPipeError(f"shell input not accepted: {type(exc).__name__}") from None

    @staticmethod
    def close_stdin(process: Process) -> None:
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                process.stdin.close()

    @staticmethod
    def kill(process: Process) -> None:
        with contextlib.suppress(Exception):
            process.kill()

    def logs(self, process: Process, skip: int = 0) -> Iterator[str]:
        """The process's stdout as it is written (text chunks), until it ends; the first
        ``skip`` characters left out (delivered already by a stream that broke).

        Ends quietly when the stream breaks for good (the sandbox stopped, or the client was
        closed under it, as a shutting-down worker does)."""
        service: Any = self.client._service
        stream = service.process_logs(session_id=process.session_id, process_id=process.id)

        async def next_event() -> Any:
            return await anext(stream)

        try:
            while True:
                try:
                    event = iter_coroutine(next_event())
                except StopAsyncIteration:
                    return
                if event.stream != "stdout":
                    continue
                data, skip = event.data[skip:], max(0, skip - len(event.data))
                if data:
                    yield data
        except (
            SandboxError,
            httpx2.HTTPError,
            SandboxStreamError,
            VercelSessionClosedError,
            OSError,
        ):
            return
        finally:
            with contextlib.suppress(Exception):
                iter_coroutine(stream.aclose())

    # -- files ------------------------------------------------------------------

    def read(self, sandbox: Sandbox, path: str) -> bytes:
        """The file's bytes; ``FileNotFoundError`` when it does not exist."""
        with translating(f"reading {path}", self.where):
            try:
                return sandbox.fs.read_bytes(path)
            except SandboxPathNotFoundError:
                raise FileNotFoundError(f"{path} (in Vercel sandbox {sandbox.name})") from None

    def write(self, sandbox: Sandbox, path: str, data: bytes) -> None:
        with translating(f"writing {path}", self.where):
            sandbox.fs.write_bytes(path, data, mode=0o600)
