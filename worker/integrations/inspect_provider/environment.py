"""``SbxSandboxEnvironment``: inspect_ai's ``SandboxEnvironment`` contract on sbx sessions.

Each sample is one sbx session (its own sandbox on the configured backend, served by
whichever worker holds its lease), made at ``sample_init`` and ended at
``sample_cleanup``. Commands, files and errors follow the contract's docstrings in
``inspect_ai.util.SandboxEnvironment``; what sbx cannot do is said where it is refused:

* ``user``: commands run as the sandbox's own user; another user raises
  ``SandboxUserUnsupportedError`` (sbx switches no users);
* ``timeout_retry`` and ``concurrency`` are accepted and ignored (the worker owns
  deadlines and concurrency).
"""

from __future__ import annotations

import errno
import functools
import logging
import posixpath
import re
import shlex
import uuid
from typing import Any, Literal, overload

import anyio
import anyio.to_thread
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel

from worker.client import SandboxClient
from worker.integrations.inspect_provider import commands as sh
from worker.integrations.inspect_provider.config import (
    CONFIG_FILE,
    SbxSandboxConfig,
    resolve_config,
)
from worker.integrations.session_calls import SandboxCallError, SessionCalls, parse_result

log = logging.getLogger(__name__)

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
PING_TIMEOUT_S = 30.0
"""How long ``task_init`` waits for a worker to answer."""
CLEANUP_TIMEOUT_S = 150.0
"""The most ``sample_cleanup`` waits to remove one sample's directories."""


def _open_client(config: SbxSandboxConfig, session_id: str) -> SandboxClient:
    return SandboxClient(config.broker_url, session_id, backend=config.backend)


def _session_id(config: SbxSandboxConfig, task_name: str) -> str:
    task = _SLUG.sub("-", task_name).strip("-._")[:40] or "task"
    return f"{config.session_prefix}-{task}-{uuid.uuid4().hex[:16]}"


@sandboxenv(name="sbx")
class SbxSandboxEnvironment(SandboxEnvironment):
    """One sample's sandbox: an sbx session, its working and scratch directories."""

    def __init__(
        self, calls: SessionCalls, config: SbxSandboxConfig, setup: list[str]
    ) -> None:
        super().__init__()
        self.calls = calls
        self.config = config
        self.workdir, self.scratch, self.uid, self.user = setup[:4]
        self.files = sh.ExecFilesPool(self.scratch)

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return SbxSandboxConfig.model_validate(config)

    @classmethod
    def config_files(cls) -> list[str]:
        return [CONFIG_FILE]

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Fails the task at once (``RuntimeError``) when no sbx worker answers."""
        cfg = resolve_config(config)

        def ping() -> bool:
            with _open_client(cfg, f"{cfg.session_prefix}-probe") as client:
                return client.ping(timeout=PING_TIMEOUT_S)

        if not await anyio.to_thread.run_sync(ping):
            raise RuntimeError(
                "no sbx worker answered within "
                f"{PING_TIMEOUT_S:g}s: start one (`sbx worker`) on the same broker"
            )

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        """A new sbx session, its sandbox made and its directories set up."""
        cfg = resolve_config(config)
        opener = functools.partial(_open_client, cfg, _session_id(cfg, task_name))
        client = await anyio.to_thread.run_sync(opener)
        calls = SessionCalls(client)
        try:
            answer = await calls.run(sh.sample_setup(cfg.workdir), timeout=120)
        except BaseException:
            await anyio.to_thread.run_sync(client.close)
            raise
        setup = answer["output"].splitlines()
        if len(setup) < 4:
            await anyio.to_thread.run_sync(client.close)
            raise SandboxUnavailableError(f"the sample's sandbox did not set up: {setup!r}")
        return {"default": cls(calls, cfg, setup)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        """Removes what the sample made and lets go of its session (never raises)."""
        for environment in environments.values():
            sandbox = environment.as_type(SbxSandboxEnvironment)
            owned = [sandbox.scratch] + ([] if sandbox.config.workdir else [sandbox.workdir])
            try:
                with anyio.move_on_after(CLEANUP_TIMEOUT_S, shield=True):
                    await sandbox.calls.run(sh.sample_teardown(owned), timeout=120)
            except Exception as exc:  # cleanup must not fail the sample
                log.warning("sbx sandbox %s: cleanup failed: %s", sandbox.calls.session_id, exc)
            finally:
                await anyio.to_thread.run_sync(sandbox.calls.client.close)

    # -- commands --------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """As ``SandboxEnvironment.exec``; ``PermissionError`` also for a command sbx's
        approval policy refused (its reason in the message)."""
        if user is not None and user not in (self.user, self.uid):
            raise SandboxUserUnsupportedError(
                f"the sbx sandbox runs commands as {self.user!r} only, not {user!r}"
            )
        inner = sh.inner_command(cmd, self._path(cwd) if cwd is not None else None, env)
        script = len(inner.encode()) > sh.INLINE_COMMAND_BYTES
        files = self.files.take()
        try:
            if input is not None:
                data = input.encode() if isinstance(input, str) else input
                await self.calls.upload(files.path("in"), data)
            if script:
                await self.calls.upload(files.path("sh"), inner.encode())
            marker = sh.new_marker()
            command = sh.exec_command(inner, files, marker, stdin=input is not None, script=script)
            limit = timeout or self.config.exec_timeout or self.calls.client.settings.max_timeout
            report = self._report(
                await self.calls.call("terminal", {"command": command, "timeout": limit}),
                marker, limit,
            )  # fmt: skip
            if not report.complete:
                report = await self._collect(report, files)
        finally:
            self.files.give(files)
        if report.returncode == 126 and "ermission denied" in report.stderr:
            raise PermissionError(errno.EACCES, report.stderr.strip(), cmd[0])
        return ExecResult(report.returncode == 0, report.returncode, report.stdout, report.stderr)

    def _report(self, raw: str, marker: str, limit: int) -> sh.ExecReport:
        result = _json(raw)
        status = result.get("status")
        if status in ("approval_required", "blocked", "denied"):
            reason = result.get("description") or result.get("error") or status
            raise PermissionError(errno.EACCES, f"sbx refused the command ({status}): {reason}")
        if result.get("exit_code") == 124 and "timed out" in (result.get("error") or ""):
            raise TimeoutError(f"the command ran past its timeout of {limit}s and was killed")
        if result.get("exit_code") is None:
            raise SandboxUnavailableError(
                f"the sbx worker did not run the command: {result.get('error') or status}"
            )
        output, truncated = result.get("output") or "", bool(result.get("truncated"))
        try:
            return sh.parse_report(output, marker, truncated=truncated)
        except sh.ReportUnreadable as exc:
            raise SandboxUnavailableError(str(exc)) from None

    async def _collect(self, report: sh.ExecReport, files: sh.ExecFiles) -> sh.ExecReport:
        """Output the worker cut on its way back: read whole from the files, within
        inspect's limit (``OutputLimitExceededError`` beyond it)."""
        out, err = files.path("out"), files.path("err")
        sizes = await self.calls.run(f"wc -c < {shlex.quote(out)}; wc -c < {shlex.quote(err)}")
        largest = max(int(n) for n in sizes["output"].split())
        if largest > SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, truncated_output=None
            )
        stdout, stderr = await self.calls.download(out), await self.calls.download(err)
        return sh.ExecReport(report.returncode, stdout.decode("utf-8", "replace"),
                             stderr.decode("utf-8", "replace"))  # fmt: skip

    # -- files -----------------------------------------------------------------------

    async def write_file(self, file: str, contents: str | bytes) -> None:
        path = self._path(file)
        state, _ = sh.parse_probe((await self.calls.run(sh.write_probe(path)))["output"])
        if state == "dir":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        if state in ("denied", "nodir"):
            raise PermissionError(errno.EACCES, "Permission denied", file)
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        try:
            await self.calls.upload(path, data)
        except SandboxCallError as exc:
            raise PermissionError(errno.EACCES, f"cannot write: {exc}", file) from None

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        path = self._path(file)
        state, size = sh.parse_probe((await self.calls.run(sh.read_probe(path)))["output"])
        if state == "dir":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        if state == "missing":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", file)
        if state != "ok":
            raise PermissionError(errno.EACCES, "Permission denied", file)
        if size > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None
            )
        data = await self.calls.download(path)
        return data.decode("utf-8") if text else data

    # -- connection ------------------------------------------------------------------

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        """How a person runs a command in this sample's sandbox with the sbx CLI (each
        ``sbx exec`` is one command; the session token comes from the local secret or
        ``SBX_SESSION_TOKEN`` and is never part of the command)."""
        if user is not None and user not in (self.user, self.uid):
            raise NotImplementedError(f"the sbx sandbox has only the user {self.user!r}")
        backend = self.calls.client.backend or self.calls.client.settings.backend
        command = (
            f"SBX_SESSION_ID={self.calls.session_id} sbx exec --backend {backend} "
            f"--workdir {shlex.quote(self.workdir)} -- ls -la"
        )
        return SandboxConnection(type="sbx", command=command)

    def default_polling_interval(self) -> float:
        return 0.5

    def _path(self, path: str) -> str:
        """``path`` in the sandbox: relative paths are the sample's working directory's.
        Raises ``ValueError`` for a path holding a NUL byte (:func:`sh.reject_nul`)."""
        sh.reject_nul(path)
        return posixpath.join(self.workdir, path)


def _json(raw: str) -> dict[str, Any]:
    try:
        return parse_result(raw)
    except SandboxCallError as exc:
        raise SandboxUnavailableError(str(exc)) from None
