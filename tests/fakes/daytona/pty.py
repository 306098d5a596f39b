"""PTY sessions of the fake toolbox: a real pseudo-terminal per session, over a websocket.

``GET /toolbox/{sandbox}/process/pty/create-connect?id=&cols=&rows=[&cwd=]``
upgrades to a websocket (subprotocol ``X-Daytona-Pty-Exit-Control``; an
``X-Daytona-Pty-Envs~<base64url JSON>`` subprotocol carries extra variables),
starts the shell interactively (``bash -i -l``) on a new pseudo-terminal inside
the sandbox, as the daemon does, and then moves bytes: binary frames from the
client are written to the terminal, terminal output goes out as binary frames.
The session starts with a ``{"type":"control","status":"connected"}`` text
frame and ends, when the shell exits or is killed, with an ``exited`` control
frame and a close frame whose reason is ``{"exitCode": N}``.

``DELETE /toolbox/{sandbox}/process/pty/{id}`` kills the shell's process tree.
A client that disconnects leaves the shell running, as the daemon does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import json
import os
import queue
import struct
import subprocess
import termios
import threading
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from .jail import HOME
from .store import ApiError, FakeSandbox
from .toolbox import SHELL, kill_tree

if TYPE_CHECKING:
    from .server import FakeDaytona

EXIT_CONTROL = "X-Daytona-Pty-Exit-Control"
ENVS_PREFIX = "X-Daytona-Pty-Envs~"


class PtySession:
    """One shell on a pseudo-terminal, bridged to one websocket client."""

    def __init__(self, session_id: str, proc: subprocess.Popen[bytes], master: int) -> None:
        self.id = session_id
        self.proc = proc
        self.master = master
        self.inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.killed = False

    def write_loop(self) -> None:
        """Thread: client input to the terminal (a blocking write must not stall the loop)."""
        while (data := self.inbox.get()) is not None:
            try:
                os.write(self.master, data)
            except OSError:
                return

    def read_chunk(self) -> bytes:
        """Next terminal output; ``b""`` once every process holding the terminal is gone."""
        try:
            return os.read(self.master, 32 * 1024)
        except OSError:
            return b""


def _envs(request: web.Request) -> dict[str, str]:
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    for proto in offered:
        if proto.startswith(ENVS_PREFIX):
            encoded = proto[len(ENVS_PREFIX) :]
            decoded = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            return {str(k): str(v) for k, v in json.loads(decoded).items()}
    return {}


def routes(fake: FakeDaytona) -> list[web.RouteDef]:
    """The PTY routes, under ``/toolbox/{sandbox}``."""

    def running(request: web.Request) -> FakeSandbox:
        sandbox = fake.store.find(request.match_info["sandbox"])
        if sandbox.state != "started" or not sandbox.jail.running:
            raise ApiError(400, "Sandbox is not running")
        return sandbox

    async def create_connect(request: web.Request) -> web.WebSocketResponse:
        sandbox = running(request)
        session_id = request.query["id"]
        sessions = fake.ptys.setdefault(sandbox.id, {})
        if session_id in sessions:
            raise ApiError(409, f"PTY session with ID '{session_id}' already exists")
        cols, rows = int(request.query.get("cols", 80)), int(request.query.get("rows", 24))
        env = {"TERM": "xterm-256color", **_envs(request)}
        cwd = request.query.get("cwd") or HOME
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        # setsid -c: the shell leads its own session with the terminal as its controlling tty.
        argv = ["setsid", "-c", *sandbox.jail.command([SHELL, "-i", "-l"], env, cwd)]
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        session = PtySession(session_id, proc, master)
        sessions[session_id] = session
        fake.pty_opens.append({"sandbox": sandbox.id, "id": session_id, "env": env, "cwd": cwd})
        ws = web.WebSocketResponse(protocols=(EXIT_CONTROL,))
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "control", "status": "connected"}))
        loop = asyncio.get_running_loop()
        sandbox.streams += 1
        threading.Thread(target=session.write_loop, daemon=True).start()
        reader = threading.Thread(
            target=_read_loop, args=(session, ws, loop, fake, sandbox), daemon=True
        )
        reader.start()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    session.inbox.put(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    session.inbox.put(msg.data.encode())
        finally:
            sandbox.streams -= 1
            fake.store.refresh_activity(sandbox)
        return ws

    async def kill(request: web.Request) -> web.Response:
        sandbox = running(request)
        session = fake.ptys.get(sandbox.id, {}).get(request.match_info["pty"])
        if session is None:
            raise ApiError(404, "PTY session not found")
        session.killed = True
        kill_tree(session.proc.pid)
        return web.json_response({"message": "PTY session deleted"})

    base = "/toolbox/{sandbox}/process/pty"
    return [web.get(f"{base}/create-connect", create_connect), web.delete(f"{base}/{{pty}}", kill)]


def _read_loop(
    session: PtySession,
    ws: web.WebSocketResponse,
    loop: asyncio.AbstractEventLoop,
    fake: FakeDaytona,
    sandbox: FakeSandbox,
) -> None:
    """Thread: terminal output to the client; at the end, the exit report and the close."""
    while data := session.read_chunk():
        future = asyncio.run_coroutine_threadsafe(ws.send_bytes(data), loop)
        with contextlib.suppress(Exception):
            future.result(timeout=60)
    code = session.proc.wait()
    os.close(session.master)
    session.inbox.put(None)
    fake.ptys.get(sandbox.id, {}).pop(session.id, None)
    exit_code = 137 if session.killed else code
    reason = json.dumps({"exitCode": exit_code})

    async def finish() -> None:
        with contextlib.suppress(Exception):
            control = {"type": "control", "status": "exited", "exitCode": exit_code}
            await ws.send_str(json.dumps(control))
            await ws.close(code=1000 if exit_code == 0 else 1011, message=reason.encode())

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(finish(), loop).result(timeout=30)
