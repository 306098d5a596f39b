"""The fake Daytona's toolbox (the in-sandbox daemon behind ``toolboxProxyUrl``).

Routes are ``/toolbox/{sandboxId}/...``, as the SDK builds them from the DTO's
``toolboxProxyUrl``. Commands run for real inside the sandbox's namespaces
(:mod:`.jail`), with the daemon's semantics:

* ``POST /process/execute``: the command is piped to the shell's stdin (the
  shell found as the daemon finds it, for every command), stdout
  and stderr combined, its own process group; on ``timeout`` the group is
  SIGKILLed and the answer is 408.
* ``/process/session...``: a long-lived shell per session; each command runs as
  ``{ CMD; } > OUT 2> ERR; echo $? > EXIT`` in it (sync or async), logs readable.
* ``POST /files/bulk-upload`` (multipart ``files[i].path``/``files[i].file``,
  parent directories created) and ``POST /files/bulk-download`` (a multipart
  answer: ``file`` parts, or ``error`` parts with a JSON error).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from aiohttp import BodyPartReader, web

from .jail import HOME
from .store import ApiError, FakeSandbox

if TYPE_CHECKING:
    from .server import FakeDaytona

# The daemon resolves its shell for every command and session (GetShell: the first of
# zsh, bash, $SHELL, sh that /etc/shells lists, found with `sh -c "grep ..."`); so does the fake.
RESOLVED_SHELL = [
    "/bin/sh",
    "-c",
    "s=$(grep '^[^#]' /etc/shells 2>/dev/null); case $s in"
    ' */usr/bin/zsh*) exec /usr/bin/zsh "$@";; */bin/zsh*) exec /bin/zsh "$@";;'
    ' */usr/bin/bash*) exec /usr/bin/bash "$@";; */bin/bash*) exec /bin/bash "$@";; esac;'
    ' exec "${SHELL:-sh}" "$@"',
    "sbx-fake-shell",
]
BOUNDARY = "DAYTONA-FILE-BOUNDARY"
SESSION_DIR = "/tmp/.daytona/session"


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every descendant (the daemon's killProcessTree)."""
    try:
        root = psutil.Process(pid)
        members = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for member in members:
        with contextlib.suppress(psutil.Error):
            member.send_signal(signal.SIGKILL)


class Session:
    """A Daytona process session: one shell reading commands from its stdin."""

    def __init__(self, session_id: str, proc: asyncio.subprocess.Process) -> None:
        self.id = session_id
        self.proc = proc
        self.commands: dict[str, dict[str, Any]] = {}


def routes(fake: FakeDaytona) -> list[web.RouteDef]:
    """The toolbox routes, under ``/toolbox/{sandbox}``."""

    def running(request: web.Request) -> FakeSandbox:
        sandbox = fake.store.find(request.match_info["sandbox"])
        if sandbox.state != "started" or not sandbox.jail.running:
            raise ApiError(400, "Sandbox is not running")
        fake.store.refresh_activity(sandbox)
        return sandbox

    async def execute(request: web.Request) -> web.Response:
        sandbox = running(request)
        body = await request.json()
        fake.executes.append(body)
        cwd = body.get("cwd") or HOME
        argv = sandbox.jail.command(RESOLVED_SHELL, body.get("envs") or {}, cwd)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        timeout = body.get("timeout") or None
        try:
            output, _ = await asyncio.wait_for(proc.communicate(body["command"].encode()), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise ApiError(408, "command execution timeout") from None
        return web.json_response(
            {"exitCode": proc.returncode, "result": output.decode("utf-8", "replace")}
        )

    async def upload(request: web.Request) -> web.Response:
        sandbox = running(request)
        reader = await request.multipart()
        dests: dict[str, str] = {}
        errors: list[str] = []
        files: list[dict[str, Any]] = []
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                continue
            name = part.name or ""
            index = name.removeprefix("files[").split("]")[0]
            if name.endswith(".path"):
                dests[index] = (await part.text()).strip()
                continue
            dest = dests.get(index)
            if dest is None:
                errors.append(f"file[{index}]: missing .path metadata")
                continue
            data = await part.read()
            try:
                target = sandbox.jail.host_path(dest)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as exc:
                errors.append(f"{dest}: create: {exc.strerror or exc}")
                continue
            files.append({"path": dest, "bytes": len(data)})
        if errors:
            return web.json_response({"errors": errors, "files": files}, status=400)
        return web.json_response({"files": files})

    async def download(request: web.Request) -> web.StreamResponse:
        sandbox = running(request)
        paths = (await request.json()).get("paths") or []
        if not paths:
            raise ApiError(400, 'request body must be {"paths": [ ... ]} and non-empty')
        body = b"".join(_download_part(request, sandbox, p) for p in paths)
        body += f"--{BOUNDARY}--\r\n".encode()
        return web.Response(body=body, headers=_boundary_header())

    async def create_session(request: web.Request) -> web.Response:
        sandbox = running(request)
        session_id = (await request.json())["sessionId"]
        if session_id in fake.sessions.get(sandbox.id, {}):
            raise ApiError(409, f"session {session_id} already exists")
        proc = await asyncio.create_subprocess_exec(
            *sandbox.jail.command(RESOLVED_SHELL, {}),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        fake.sessions.setdefault(sandbox.id, {})[session_id] = Session(session_id, proc)
        return web.Response(status=201)

    def session(request: web.Request) -> tuple[FakeSandbox, Session]:
        sandbox = running(request)
        found = fake.sessions.get(sandbox.id, {}).get(request.match_info["session"])
        if found is None:
            raise ApiError(404, "session not found")
        return sandbox, found

    async def session_exec(request: web.Request) -> web.Response:
        sandbox, sess = session(request)
        body = await request.json()
        command = body.get("command", "")
        if not command.strip():
            raise ApiError(400, "command cannot be empty")
        cmd_id = secrets.token_hex(8)
        where = f"{SESSION_DIR}/{sess.id}/{cmd_id}"
        sandbox.jail.host_path(where).mkdir(parents=True)
        sess.commands[cmd_id] = {"id": cmd_id, "command": command, "dir": where}
        assert sess.proc.stdin is not None
        redirect = f'> {where}/stdout 2> {where}/stderr; echo "$?" > {where}/exit_code'
        line = f"{{ {command}\n}} {redirect}\n"
        sess.proc.stdin.write(line.encode())
        await sess.proc.stdin.drain()
        if body.get("runAsync") or body.get("async"):
            return web.json_response({"cmdId": cmd_id}, status=202)
        exit_file = sandbox.jail.host_path(f"{where}/exit_code")
        while not exit_file.exists() or not exit_file.read_text().endswith("\n"):
            if sess.proc.returncode is not None:
                raise ApiError(400, "session cancelled")
            await asyncio.sleep(0.05)
        code = int(exit_file.read_text())
        sess.commands[cmd_id]["exitCode"] = code
        return web.json_response({"cmdId": cmd_id, "exitCode": code, **_logs(sandbox, where)})

    def command_record(request: web.Request) -> tuple[FakeSandbox, dict[str, Any]]:
        sandbox, sess = session(request)
        record = sess.commands.get(request.match_info["command"])
        if record is None:
            raise ApiError(404, "command not found")
        exit_file = sandbox.jail.host_path(f"{record['dir']}/exit_code")
        if "exitCode" not in record and exit_file.exists():
            text = exit_file.read_text()
            if text.endswith("\n"):
                record["exitCode"] = int(text)
        return sandbox, record

    async def get_command(request: web.Request) -> web.Response:
        _, record = command_record(request)
        return web.json_response(
            {"id": record["id"], "command": record["command"], "exitCode": record.get("exitCode")}
        )

    async def command_logs(request: web.Request) -> web.Response:
        sandbox, record = command_record(request)
        return web.json_response(_logs(sandbox, record["dir"]))

    async def delete_session(request: web.Request) -> web.Response:
        sandbox, sess = session(request)
        kill_tree(sess.proc.pid)
        await sess.proc.wait()
        del fake.sessions[sandbox.id][sess.id]
        return web.Response(status=204)

    base = "/toolbox/{sandbox}"
    return [
        web.post(f"{base}/process/execute", execute),
        web.post(f"{base}/files/bulk-upload", upload),
        web.post(f"{base}/files/bulk-download", download),
        web.post(f"{base}/process/session", create_session),
        web.post(f"{base}/process/session/{{session}}/exec", session_exec),
        web.get(f"{base}/process/session/{{session}}/command/{{command}}", get_command),
        web.get(f"{base}/process/session/{{session}}/command/{{command}}/logs", command_logs),
        web.delete(f"{base}/process/session/{{session}}", delete_session),
    ]


def _logs(sandbox: FakeSandbox, where: str) -> dict[str, str]:
    """A session command's ``stdout``, ``stderr`` and both as ``output`` (so far)."""
    logs: dict[str, str] = {}
    for stream in ("stdout", "stderr"):
        path = sandbox.jail.host_path(f"{where}/{stream}")
        logs[stream] = path.read_bytes().decode("utf-8", "replace") if path.exists() else ""
    logs["output"] = logs["stdout"] + logs["stderr"]
    return logs


def _boundary_header() -> dict[str, str]:
    return {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def _disposition(name: str, path: str) -> str:
    latin = "".join(c if 0x20 <= ord(c) <= 0xFF and c not in '"\\' else "_" for c in path)
    quoted = urllib.parse.quote(path.encode(), safe="!#$&+-.^_`|~")
    return f'form-data; name="{name}"; filename="{latin}"; filename*=utf-8\'\'{quoted}'


def _download_part(request: web.Request, sandbox: FakeSandbox, path: str) -> bytes:
    """One multipart part: the file's bytes, or a JSON error as the daemon writes it."""
    try:
        data = _read_sandbox_file(sandbox, path)
    except ApiError as error:
        payload = json.dumps(
            {
                "statusCode": error.status,
                "message": error.message,
                "code": _FILE_CODES.get(error.status, "FILE_READ_FAILED"),
                "path": path,
                "method": request.method,
                "source": "DAYTONA_DAEMON",
            }
        ).encode()
        head = (
            f"--{BOUNDARY}\r\nContent-Disposition: {_disposition('error', path)}\r\n"
            "Content-Type: application/json; charset=utf-8\r\n\r\n"
        )
        return head.encode() + payload + b"\r\n"
    head = (
        f"--{BOUNDARY}\r\nContent-Disposition: {_disposition('file', path)}\r\n"
        f"Content-Length: {len(data)}\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    return head.encode() + data + b"\r\n"


_FILE_CODES = {404: "FILE_NOT_FOUND", 403: "FILE_ACCESS_DENIED", 400: "INVALID_FILE_PATH"}


def _read_sandbox_file(sandbox: FakeSandbox, path: str) -> bytes:
    try:
        target: Path = sandbox.jail.host_path(path)
    except PermissionError:
        raise ApiError(403, f"permission denied: {path}") from None
    try:
        if target.is_dir():
            raise ApiError(400, f"invalid file path: path points to a directory: {path}")
        return target.read_bytes()
    except FileNotFoundError:
        raise ApiError(404, f"file not found: {path}") from None
    except PermissionError:
        raise ApiError(403, f"permission denied: {path}") from None
