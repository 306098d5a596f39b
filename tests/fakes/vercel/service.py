"""State of the fake Vercel Sandbox service: sandboxes, runtime sessions, commands, files.

Independent of HTTP (``server.py`` maps requests onto it). Every operation
raises :class:`ApiError` the way the service answers: an HTTP status and a
``{"error": {"code", "message"}}`` body.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runtime import SANDBOX_CWD, Command, Disk, Jail, decode_stdin, new_id, spawn


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _ms() -> int:
    return int(time.time() * 1000)


@dataclass(eq=False)
class Session:
    """One boot of a sandbox: a jail, its commands, its execution time limit."""

    id: str
    sandbox: Sandbox
    jail: Jail | None
    timeout_ms: int
    status: str = "running"
    requested_at: int = field(default_factory=_ms)
    started_at: int = field(default_factory=_ms)
    stopped_at: int | None = None
    commands: dict[str, Command] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        sb = self.sandbox
        return {
            "id": self.id,
            "sourceSandboxName": sb.name,
            "projectId": sb.project_id,
            "status": self.status,
            "cwd": SANDBOX_CWD,
            "region": "iad1",
            "memory": sb.memory,
            "vcpus": sb.vcpus,
            "timeout": self.timeout_ms,
            "networkPolicy": sb.network_policy,
            "requestedAt": self.requested_at,
            "startedAt": self.started_at,
            "stoppedAt": self.stopped_at,
        }


@dataclass(eq=False)
class Sandbox:
    name: str
    project_id: str
    image: str | None
    persistent: bool
    tags: dict[str, str]
    env: dict[str, str]
    network_policy: dict[str, Any]
    vcpus: int
    memory: int
    timeout_ms: int
    disk: Disk
    session: Session | None = None
    created_at: int = field(default_factory=_ms)
    updated_at: int = field(default_factory=_ms)
    status_updated_at: int = field(default_factory=_ms)

    def payload(self) -> dict[str, Any]:
        session = self.session
        assert session is not None
        return {
            "name": self.name,
            "currentSessionId": session.id,
            "image": self.image,
            "status": session.status,
            "persistent": self.persistent,
            "projectId": self.project_id,
            "cwd": SANDBOX_CWD,
            "region": "iad1",
            "memory": self.memory,
            "vcpus": self.vcpus,
            "timeout": self.timeout_ms,
            "networkPolicy": self.network_policy,
            "tags": self.tags,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "statusUpdatedAt": self.status_updated_at,
        }

    def answer(self, **extra: Any) -> dict[str, Any]:
        assert self.session is not None
        return {"sandbox": self.payload(), "session": self.session.payload(), "routes": [], **extra}


class FakeService:
    """Sandboxes of one fake project, with their real processes under ``state``."""

    def __init__(self, state: Path, project_id: str) -> None:
        self.state = state
        self.project_id = project_id
        self.lock = threading.RLock()
        self.sandboxes: dict[str, Sandbox] = {}
        self.sessions: dict[str, Session] = {}
        self.max_sandboxes: int | None = None
        """Creating one more than this many live sandboxes is a quota error (HTTP 402)."""
        self.honour_timeouts = True
        """False: a command's ``timeout`` is ignored (a service that stalls)."""

    # -- sandboxes --------------------------------------------------------------

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name") or new_id("sbx"))
        if body.get("projectId") != self.project_id:
            raise ApiError(404, "project_not_found", "Project not found")
        with self.lock:
            if name in self.sandboxes:
                raise ApiError(409, "sandbox_exists", f"Sandbox {name} already exists")
            if self.max_sandboxes is not None and len(self.sandboxes) >= self.max_sandboxes:
                raise ApiError(
                    402,
                    "sandbox_limit_reached",
                    "You have reached the concurrent sandbox limit of your plan",
                )
            resources = body.get("resources") or {}
            sandbox = Sandbox(
                name=name,
                project_id=self.project_id,
                image=body.get("image"),
                persistent=bool(body.get("persistent")),
                tags=dict(body.get("tags") or {}),
                env=dict(body.get("env") or {}),
                network_policy=dict(body.get("networkPolicy") or {"mode": "allow-all"}),
                vcpus=int(resources.get("vcpus") or 2),
                memory=int(resources.get("memory") or 4096),
                timeout_ms=int(body.get("timeout") or 300_000),
                disk=Disk(self.state / name),
            )
            self._boot(sandbox)
            self.sandboxes[name] = sandbox
            return sandbox.answer()

    def _boot(self, sandbox: Sandbox) -> None:
        network = sandbox.network_policy.get("mode") != "deny-all"
        jail = Jail(sandbox.disk.root, sandbox.name[:60], network=network)
        session = Session(new_id("sess"), sandbox, jail, sandbox.timeout_ms)
        sandbox.session = session
        sandbox.status_updated_at = _ms()
        self.sessions[session.id] = session

    def get(self, name: str, *, resume: bool) -> dict[str, Any]:
        with self.lock:
            sandbox = self._sandbox(name)
            resumed = False
            assert sandbox.session is not None
            if resume and sandbox.session.status == "stopped":
                if not sandbox.persistent:
                    sandbox.disk.reset()  # nothing of a non-persistent sandbox is kept
                self._boot(sandbox)
                resumed = True
            return sandbox.answer(resumed=resumed)

    def _sandbox(self, name: str) -> Sandbox:
        sandbox = self.sandboxes.get(name)
        if sandbox is None:
            raise ApiError(404, "sandbox_not_found", f"Sandbox {name} not found")
        return sandbox

    def query(self, params: dict[str, str]) -> dict[str, Any]:
        if params.get("project") != self.project_id:
            raise ApiError(404, "project_not_found", "Project not found")
        with self.lock:
            found = sorted(self.sandboxes.values(), key=lambda s: s.name)
            prefix = params.get("namePrefix")
            if prefix:
                found = [s for s in found if s.name.startswith(prefix)]
            if params.get("tags"):
                key, _, value = params["tags"].partition(":")
                found = [s for s in found if s.tags.get(key) == value]
            start = int(params.get("cursor") or 0)
            limit = int(params.get("limit") or 20)
            page = found[start : start + limit]
            nxt = str(start + limit) if start + limit < len(found) else None
            return {
                "sandboxes": [s.payload() for s in page],
                "pagination": {"count": len(page), "next": nxt, "prev": None},
            }

    def destroy(self, name: str) -> dict[str, Any]:
        with self.lock:
            sandbox = self._sandbox(name)
            assert sandbox.session is not None
            self._stop(sandbox.session)
            del self.sandboxes[name]
            sandbox.disk.remove()
            return sandbox.answer()

    def update(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            sandbox = self._sandbox(name)
            if "tags" in body:
                sandbox.tags = dict(body["tags"])
            if "timeout" in body:
                sandbox.timeout_ms = int(body["timeout"])
            sandbox.updated_at = _ms()
            return sandbox.answer()

    # -- sessions ---------------------------------------------------------------

    def session(self, session_id: str, *, running: bool = True) -> Session:
        with self.lock:
            session = self.sessions.get(session_id)
            if session is None:
                raise ApiError(404, "session_not_found", f"Session {session_id} not found")
            if running and session.status != "running":
                raise ApiError(410, "sandbox_stopped", "The sandbox session has stopped")
            return session

    def _stop(self, session: Session) -> None:
        if session.status == "stopped":
            return
        if session.jail is not None:
            # Every process is gone before the session reads as stopped, so whoever sees
            # it stopped finds nothing of it still running.
            session.jail.kill()
        session.status = "stopped"
        session.stopped_at = _ms()
        session.sandbox.status_updated_at = _ms()

    def stop(self, session_id: str) -> dict[str, Any]:
        with self.lock:
            session = self.session(session_id, running=False)
            self._stop(session)
            return {"session": session.payload(), "sandbox": session.sandbox.payload()}

    def extend(self, session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        duration = int(body.get("duration") or 0)
        if duration < 1000:
            raise ApiError(400, "bad_request", "duration must be at least one second")
        with self.lock:
            session = self.session(session_id)
            session.timeout_ms += duration
            return {"session": session.payload()}

    def expire(self) -> list[str]:
        """Stop the sessions past their execution time limit; their ids."""
        now = _ms()
        with self.lock:
            late = [
                s
                for s in self.sessions.values()
                if s.status == "running" and now > s.started_at + s.timeout_ms
            ]
            for session in late:
                self._stop(session)
            return [s.id for s in late]

    def shutdown(self) -> None:
        with self.lock:
            for session in self.sessions.values():
                self._stop(session)
            for sandbox in self.sandboxes.values():
                sandbox.disk.remove()

    # -- commands ---------------------------------------------------------------

    def run(self, session_id: str, body: dict[str, Any]) -> Command:
        session = self.session(session_id)
        assert session.jail is not None
        if not self.honour_timeouts:
            body = {k: v for k, v in body.items() if k != "timeout"}
        command = spawn(session.jail, session_id, body, session.sandbox.env)
        session.commands[command.id] = command
        return command

    def command(self, session_id: str, command_id: str) -> Command:
        session = self.session(session_id, running=False)
        command = session.commands.get(command_id)
        if command is None:
            raise ApiError(404, "command_not_found", f"Command {command_id} not found")
        return command

    def stdin(self, session_id: str, command_id: str, body: dict[str, Any]) -> dict[str, Any]:
        command = self.command(session_id, command_id)
        offset = body.get("offset")
        try:
            written = command.write_stdin(
                decode_stdin(body), None if offset is None else int(offset), bool(body.get("close"))
            )
        except BrokenPipeError:
            raise ApiError(
                400, "command_stdin_unavailable", "The command is not reading its standard input"
            ) from None
        return {"command": command.payload(), "bytesWritten": written}

    # -- files ------------------------------------------------------------------

    def _path(self, session_id: str, path: str, cwd: str | None) -> Path:
        session = self.session(session_id)
        assert session.jail is not None
        full = path if path.startswith("/") else f"{cwd or SANDBOX_CWD}/{path}"
        return session.jail.host_path(full)

    def read(self, session_id: str, body: dict[str, Any]) -> bytes:
        host = self._path(session_id, str(body["path"]), body.get("cwd"))
        try:
            return host.read_bytes()
        except FileNotFoundError:
            raise ApiError(404, "file_not_found", f"File not found: {body['path']}") from None
        except IsADirectoryError:
            raise ApiError(400, "is_a_directory", f"Is a directory: {body['path']}") from None
        except PermissionError:
            raise ApiError(403, "permission_denied", f"Permission denied: {body['path']}") from None

    def write(self, session_id: str, cwd: str, archive: bytes) -> None:
        session = self.session(session_id)
        assert session.jail is not None
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                target = session.jail.host_path(os.path.normpath(f"{cwd}/{member.name}"))
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                data = source.read() if source is not None else b""
                tmp = target.with_name(f".{target.name}.fake-upload")
                tmp.write_bytes(data)
                os.chmod(tmp, member.mode & 0o7777)
                os.replace(tmp, target)

    def mkdir(self, session_id: str, body: dict[str, Any]) -> None:
        host = self._path(session_id, str(body["path"]), body.get("cwd"))
        host.mkdir(parents=bool(body.get("recursive", True)), exist_ok=True)
