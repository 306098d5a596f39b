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
import struct
import subprocess
import termios
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web

from .jail import HOME
from .store import ApiError, FakeSandbox
from .toolbox import RESOLVED_SHELL, kill_tree

if TYPE_CHECKING:
    from .server import FakeDaytona

EXIT_CONTROL = "X-Daytona-Pty-Exit-Control"
ENVS_PREFIX = "X-Daytona-Pty-Envs~"


class PtySession:
    """One shell on a pseudo-terminal, bridged to one websocket client on the event loop."""

    def __init__(self, session_id: str, proc: subprocess.Popen[bytes], master: int) -> None:
        self.id = session_id
        self.proc = proc
        self.master = master
        self.killed = False
        self.output: asyncio.Queue[bytes] = asyncio.Queue()
        self._unsent = bytearray()
        self._loop = asyncio.get_running_loop()
        os.set_blocking(master, False)
        self._loop.add_reader(master, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 32 * 1024)
        except BlockingIOError:
            return
        except OSError:  # EIO: every process holding the terminal is gone
            data = b""
        if not data:
            self._loop.remove_reader(self.master)
        self.output.put_nowait(data)

    def write(self, data: bytes) -> None:
        """Client input to the terminal; what the terminal cannot take yet waits for it."""
        was_waiting = bool(self._unsent)
        self._unsent += data
        if not was_waiting:
            self._flush()

    def _flush(self) -> None:
        try:
            written = os.write(self.master, self._unsent)
        except BlockingIOError:
            written = 0
        except OSError:
            self._unsent.clear()
            written = 0
        del self._unsent[:written]
        if self._unsent:
            self._loop.add_writer(self.master, self._flush_when_writable)

    def _flush_when_writable(self) -> None:
        self._loop.remove_writer(self.master)
        self._flush()

    def close(self) -> None:
        self._loop.remove_reader(self.master)
        self._loop.remove_writer(self.master)
        os.close(self.master)


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
        shell = [*RESOLVED_SHELL, "-i", "-l"]
        argv = ["setsid", "-c", *sandbox.jail.command(shell, env, cwd)]
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        session = PtySession(session_id, proc, master)
        sessions[session_id] = session
        fake.pty_opens.append({"sandbox": sandbox.id, "id": session_id, "env": env, "cwd": cwd})
        ws = web.WebSocketResponse(protocols=(EXIT_CONTROL,))
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "control", "status": "connected"}))
        sandbox.streams += 1
        sender = asyncio.create_task(_send_output(session, ws, fake, sandbox))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    session.write(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    session.write(msg.data.encode())
        finally:
            sandbox.streams -= 1
            fake.store.refresh_activity(sandbox)
        if sender.done():
            sender.result()
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


async def _send_output(
    session: PtySession, ws: web.WebSocketResponse, fake: FakeDaytona, sandbox: FakeSandbox
) -> None:
    """Terminal output to the client; at the end, the exit report and the close."""
    while data := await session.output.get():
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_bytes(data)
    code = await asyncio.get_running_loop().run_in_executor(None, session.proc.wait)
    session.close()
    fake.ptys.get(sandbox.id, {}).pop(session.id, None)
    exit_code = 137 if session.killed else code
    with contextlib.suppress(ConnectionError, RuntimeError):
        control = {"type": "control", "status": "exited", "exitCode": exit_code}
        await ws.send_str(json.dumps(control))
        reason = json.dumps({"exitCode": exit_code}).encode()
        await ws.close(code=1000 if exit_code == 0 else 1011, message=reason)
