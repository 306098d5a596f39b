"""The one adapter between sbx and the ``daytona`` SDK: every SDK call is here.

The SDK renames calls between releases; a rename is a one-line change in this
module. Every error the SDK raises leaves this module as an sbx error (see
:func:`translate`): one line, no credential, the right class.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import re
import threading
import warnings
from collections.abc import Callable
from datetime import datetime
from http import HTTPStatus
from typing import Any, TypeVar

import daytona
import httpx
import urllib3
from daytona.common.pty import PtySize
from daytona.handle.pty_handle import PtyHandle

from environments.backends.daytona.config import DaytonaConfig
from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxDead,
    SandboxError,
    SandboxNotFound,
    ServiceUnreachable,
)

T = TypeVar("T")
Sandbox = daytona.Sandbox
_SDK_PREFIX = re.compile(r"^(Failed|Failure) [^:]{0,60}: ")
_QUOTA = re.compile(r"limit exceeded|quota", re.IGNORECASE)
_PTY_SIZE = PtySize(rows=50, cols=999)
# Sandbox states, by what sbx does on finding one.
STARTABLE = frozenset({"stopped", "archived", "paused"})
COMING_UP = frozenset(
    {"creating", "starting", "restoring", "pulling_snapshot", "pending_build",
     "building_snapshot", "resuming", "resizing", "snapshotting", "forking"}
)  # fmt: skip
GOING_DOWN = frozenset({"stopping", "archiving", "pausing"})
BROKEN = frozenset({"error", "build_failed", "destroyed", "destroying"})


def translate(
    exc: BaseException, action: str, secret: str | None = None, service: str = "Daytona"
) -> SandboxError:
    """The sbx error for an SDK (or transport) error raised while doing ``action``.

    Auth 401/403 -> :class:`AuthenticationFailed`; missing key -> :class:`CredentialsMissing`;
    quota or rate limit -> :class:`QuotaExceeded`; 404 -> :class:`SandboxNotFound`; refused,
    unreachable or timed out -> :class:`ServiceUnreachable`; a sandbox that is not running ->
    :class:`SandboxDead`; anything else -> :class:`SandboxError`.
    """
    if isinstance(exc, SandboxError):
        return exc
    message = _one_line(str(exc), secret)
    status = getattr(exc, "status_code", None)
    answer = _http_answer(exc)
    if answer is not None:
        # The SDK's file transfers pass the answer on raw: the HTTP client's own error
        # (a URL and a link to a web page) or the whole error body.
        status, said = answer
        message = _one_line(said, secret)
    if isinstance(exc, daytona.DaytonaAuthenticationError) and status is None:
        return CredentialsMissing("no Daytona API key: set SBX_DAYTONA_API_KEY or DAYTONA_API_KEY")
    if status == 401 or isinstance(exc, daytona.DaytonaAuthenticationError):
        return AuthenticationFailed(f"Daytona rejected the API key while trying to {action}")
    if status == 429 or (status in (400, 403) and _QUOTA.search(message)):
        return QuotaExceeded(f"Daytona refused to {action}: {message}")
    if status == 403:
        return AuthenticationFailed(f"Daytona denied the API key the right to {action}: {message}")
    if status == 404:
        return SandboxNotFound(f"Daytona could not {action}: {message}")
    transport = _transport_failure(exc)
    if transport is not None:
        return ServiceUnreachable(f"{service} {transport} while sbx tried to {action}")
    if status == 400 and "not running" in message.lower():
        return SandboxDead(f"Daytona could not {action}: the sandbox is not running")
    return SandboxError(f"Daytona could not {action}: {message}")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, in turn."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _http_answer(exc: BaseException) -> tuple[int, str] | None:
    """The status and what the service said, when ``exc`` (or what caused it) carries an
    HTTP error answer the SDK passed on raw: the status and its phrase, and the
    ``message`` of Daytona's error body where the SDK kept the body."""
    for error in _chain(exc):
        if isinstance(error, httpx.HTTPStatusError):
            status, body = error.response.status_code, ""
            with contextlib.suppress(Exception):  # a streamed answer's body was never read
                body = error.response.text
            return status, _said(status, body)
        quoted = _STATUS_AND_BODY.search(str(error))
        if quoted is not None:
            status = int(quoted.group(1))
            return status, _said(status, quoted.group(2))
    return None


_STATUS_AND_BODY = re.compile(r"^(?:[^:]{0,60}: )?([1-5]\d\d): (\{.*\})\s*$", re.S)
"""How the SDK's file upload words a refusal: the status, then the raw body."""


def _said(status: int, body: str) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "(an unknown status)"
    said = f"the service answered {status} {phrase}"
    with contextlib.suppress(ValueError):  # not JSON: a proxy's page, or no body at all
        envelope = json.loads(body)
        message = envelope.get("message") if isinstance(envelope, dict) else None
        if isinstance(message, str) and message:
            said = f"{said}: {message}"
    return said


def _transport_failure(exc: BaseException) -> str | None:
    """What went wrong on the wire, when ``exc`` (or what caused it) is a transport error."""
    chain = _chain(exc)
    refused = (ConnectionRefusedError, urllib3.exceptions.NewConnectionError, httpx.ConnectError)
    if any(isinstance(e, refused) for e in chain):
        return "refused the connection"
    timeouts = (TimeoutError, urllib3.exceptions.TimeoutError, httpx.TimeoutException)
    if any(isinstance(e, (*timeouts, daytona.DaytonaTimeoutError)) for e in chain):
        return "did not answer in time"
    wire = (OSError, urllib3.exceptions.HTTPError, httpx.TransportError)
    if any(isinstance(e, (*wire, daytona.DaytonaConnectionError)) for e in chain):
        return "could not be reached"
    return None


def _one_line(text: str, secret: str | None) -> str:
    line = _SDK_PREFIX.sub("", " ".join(text.split()))[:300] or "no details"
    if secret:
        line = line.replace(secret, "***")
    return line


class Client:
    """One SDK client (API key, URL, region and timeouts), shared by a process's sandboxes."""

    def __init__(self, config: DaytonaConfig) -> None:
        self.request_timeout = config.request_timeout
        self.create_timeout = config.create_timeout
        self._secret = config.api_key.get_secret_value() if config.api_key else None
        # A URL may carry user:password@; that part never reaches a message.
        url = re.sub(r"//[^/@]*@", "//", config.api_url or "")
        self._service = f"Daytona ({url})" if url else "Daytona"
        try:
            with warnings.catch_warnings():
                # Without an api_url the SDK reads its own deprecated server_url field.
                warnings.filterwarnings("ignore", "`server_url` is deprecated", DeprecationWarning)
                self._daytona = daytona.Daytona(
                    daytona.DaytonaConfig(
                        api_key=self._secret, api_url=config.api_url, target=config.target
                    )
                )
        except Exception as exc:
            raise translate(exc, "connect", self._secret) from None
        # The key the SDK found itself (DAYTONA_API_KEY) is scrubbed from messages too.
        self._secret = self._secret or getattr(self._daytona, "_api_key", None)

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:
            raise translate(exc, action, self._secret, self._service) from None

    # -- sandboxes -------------------------------------------------------------------

    def create(self, cfg: DaytonaConfig, name: str, labels: dict[str, str]) -> Sandbox:
        """A new started sandbox shaped by ``cfg``. Raises :class:`NameTaken` when a sandbox
        of that name exists (another worker was first), else as :func:`translate` says."""
        common: dict[str, Any] = {
            "name": name,
            "labels": labels,
            "env_vars": dict(cfg.env),
            "os_user": cfg.os_user,
            "network_block_all": cfg.network_block_all,
            "network_allow_list": ",".join(cfg.network_allow_list) or None,
            "domain_allow_list": ",".join(cfg.domain_allow_list) or None,
            "auto_stop_interval": cfg.auto_stop_interval,
            "auto_archive_interval": cfg.auto_archive_interval,
            "auto_delete_interval": 0 if cfg.ephemeral else cfg.auto_delete_interval,
        }
        params: daytona.CreateSandboxFromImageParams | daytona.CreateSandboxFromSnapshotParams
        if cfg.image:
            resources = daytona.Resources(cpu=cfg.cpu, memory=cfg.memory, disk=cfg.disk)
            params = daytona.CreateSandboxFromImageParams(
                image=cfg.image, resources=resources, **common
            )
        else:
            params = daytona.CreateSandboxFromSnapshotParams(snapshot=cfg.snapshot, **common)
        try:
            return self._daytona.create(params, timeout=self.create_timeout)
        except daytona.DaytonaConflictError:
            raise NameTaken(name) from None
        except Exception as exc:
            raise translate(exc, "create a sandbox", self._secret, self._service) from None

    def get(self, name_or_id: str) -> Sandbox | None:
        """The sandbox with this name or id, or ``None`` when there is none."""
        try:
            return self._call(
                "look up a sandbox",
                lambda: self._daytona.get(name_or_id, request_timeout=self.request_timeout),
            )
        except SandboxNotFound:
            return None

    def find(self, labels: dict[str, str]) -> list[Sandbox]:
        """Sandboxes carrying all of ``labels`` (every page)."""
        query = daytona.ListSandboxesQuery(labels=labels)
        return self._call(
            "list sandboxes",
            lambda: list(self._daytona.list(query, request_timeout=self.request_timeout)),
        )

    def state(self, sandbox: Sandbox, *, refresh: bool = True) -> str:
        """The sandbox's state, read again unless ``refresh`` is off (``destroyed`` when the
        service no longer knows it)."""
        if refresh:
            try:
                self._call(
                    "read the sandbox's state",
                    lambda: sandbox.refresh_data(request_timeout=self.request_timeout),
                )
            except SandboxNotFound:
                return "destroyed"
        return str(getattr(sandbox.state, "value", sandbox.state) or "unknown")

    def start(self, sandbox: Sandbox) -> None:
        self._call("start the sandbox", lambda: sandbox.start(timeout=self.create_timeout))

    def wait_started(self, sandbox: Sandbox) -> None:
        self._call(
            "wait for the sandbox to start",
            lambda: sandbox.wait_for_sandbox_start(timeout=self.create_timeout),
        )

    def wait_stopped(self, sandbox: Sandbox) -> None:
        self._call(
            "wait for the sandbox to stop",
            lambda: sandbox.wait_for_sandbox_stop(timeout=self.create_timeout),
        )

    def stop(self, sandbox: Sandbox) -> None:
        self._call("stop the sandbox", lambda: sandbox.stop(timeout=self.create_timeout))

    def delete(self, sandbox: Sandbox, *, wait: bool = False) -> None:
        """Delete the sandbox (gone already is fine); ``wait`` until it is destroyed."""
        timeout = self.create_timeout if wait else self.request_timeout
        with contextlib.suppress(SandboxNotFound):
            self._call("delete the sandbox", lambda: sandbox.delete(timeout, wait=wait))

    def refresh_activity(self, sandbox: Sandbox) -> None:
        self._call(
            "refresh the sandbox's activity",
            lambda: sandbox.refresh_activity(request_timeout=self.request_timeout),
        )

    # -- inside a sandbox ------------------------------------------------------------

    def exec(self, sandbox: Sandbox, command: str, timeout: int) -> tuple[int, str]:
        """Run ``command`` through the toolbox (shell reading it from stdin); (status, output)."""
        response = self._call(
            "run a command in the sandbox", lambda: sandbox.process.exec(command, timeout=timeout)
        )
        code = response.exit_code
        return (code if isinstance(code, int) else -1), response.result or ""

    def upload(self, sandbox: Sandbox, data: bytes, path: str) -> None:
        timeout = int(self.create_timeout)
        self._call("upload a file", lambda: sandbox.fs.upload_file(data, path, timeout))

    def download(self, sandbox: Sandbox, path: str) -> bytes:
        """The file's bytes. Raises ``FileNotFoundError``, ``IsADirectoryError``,
        ``PermissionError`` for what the daemon reports about the path."""
        try:
            return bytes(sandbox.fs.download_file(path, int(self.create_timeout)))
        except daytona.DaytonaError as exc:
            code = getattr(exc, "code", None)
            if isinstance(exc, daytona.DaytonaFileNotFoundError) or code == "FILE_NOT_FOUND":
                raise FileNotFoundError(path) from None
            if isinstance(exc, daytona.DaytonaForbiddenError) or code == "FILE_ACCESS_DENIED":
                raise PermissionError(path) from None
            if isinstance(exc, daytona.DaytonaInvalidFilePathError) or code == "INVALID_FILE_PATH":
                raise IsADirectoryError(path) from None
            raise translate(exc, "download a file", self._secret, self._service) from None
        except Exception as exc:
            raise translate(exc, "download a file", self._secret, self._service) from None

    def open_pty(self, sandbox: Sandbox, pty_id: str, cwd: str | None) -> PtyHandle:
        """A connected PTY session (its shell started), within the request timeout."""
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sbx-daytona-pty")
        future = pool.submit(
            self._call,
            "open a terminal in the sandbox",
            lambda: sandbox.process.create_pty_session(pty_id, cwd=cwd, pty_size=_PTY_SIZE),
        )
        pool.shutdown(wait=False)
        try:
            return future.result(timeout=self.request_timeout)
        except TimeoutError:
            # A late connection is closed as soon as it arrives.
            future.add_done_callback(_disconnect_late)
            raise ServiceUnreachable(
                f"Daytona did not open a terminal within {self.request_timeout:g} s"
            ) from None

    def kill_pty(self, sandbox: Sandbox, pty_id: str) -> None:
        self._call(
            "end the session shell",
            lambda: sandbox.process.kill_pty_session(pty_id, request_timeout=self.request_timeout),
        )


def _disconnect_late(future: concurrent.futures.Future[PtyHandle]) -> None:
    if future.exception() is None:
        future.result().disconnect()


class NameTaken(SandboxError):
    """Another worker created a sandbox with this name first."""


_clients: dict[tuple[object, ...], Client] = {}
_clients_lock = threading.Lock()


def client_for(config: DaytonaConfig) -> Client:
    """A client per (key, URL, region, timeouts), shared by every sandbox of this process."""
    key = (
        config.api_key.get_secret_value() if config.api_key else None,
        config.api_url,
        config.target,
        config.create_timeout,
        config.request_timeout,
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = Client(config)
        return client


def last_activity(sandbox: Sandbox) -> float:
    """Seconds since the epoch of the sandbox's last activity (or update, or creation)."""
    for value in (sandbox.last_activity_at, sandbox.updated_at, sandbox.created_at):
        if value:
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return 0.0

