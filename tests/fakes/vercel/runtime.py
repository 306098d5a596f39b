"""What a fake Vercel sandbox runs on: a bubblewrap jail per runtime session, real processes.

A runtime session is a bubblewrap "VM": its own pid, ipc and uts namespaces
(and network namespace for a deny-all policy), the host's ``/usr`` and ``/etc``
read-only, and two writable directories of the sandbox's disk bound at
``/vercel/sandbox`` (the working directory) and ``/tmp``. Commands enter it
with ``nsenter``, so a command's process tree, ``/proc`` scans and signals stay
inside the session, and stopping a session (killing its init) ends every
process in it at once, background ones included.

Output is decoded as UTF-8 with U+FFFD for invalid bytes, as a service whose
log records carry text must do.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SANDBOX_CWD = "/vercel/sandbox"
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
_READ_SIZE = 1 << 16


def _ms() -> int:
    return int(time.time() * 1000)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


class Jail:
    """One runtime session's bubblewrap namespaces, started at once, stopped by :meth:`kill`."""

    def __init__(self, disk: Path, hostname: str, *, network: bool) -> None:
        argv = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", hostname]
        if not network:
            argv.append("--unshare-net")
        for top in ("usr", "etc", "opt"):
            if os.path.isdir(f"/{top}"):
                argv += ["--ro-bind", f"/{top}", f"/{top}"]
        for link in ("bin", "lib", "lib64", "sbin"):
            path = f"/{link}"
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        argv += ["--dev", "/dev", "--proc", "/proc", "--dir", "/vercel"]
        argv += ["--bind", str(disk / "sandbox"), SANDBOX_CWD, "--bind", str(disk / "tmp"), "/tmp"]
        read_fd, write_fd = os.pipe()
        # The init says "ready" once it runs: bwrap reports its pid before the mounts
        # are in place, and a command entering earlier finds no /usr.
        argv += [
            "--info-fd",
            str(write_fd),
            "--",
            "/bin/sh",
            "-c",
            "echo ready; exec >/dev/null; trap 'exit 0' TERM; while :; do sleep 3600; done",
        ]
        self._bwrap = subprocess.Popen(
            argv,
            pass_fds=(write_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={"PATH": _PATH},  # nothing of the service's own environment gets in
        )
        os.close(write_fd)
        with os.fdopen(read_fd) as info:
            text = info.read()
        assert self._bwrap.stdout is not None
        ready = self._bwrap.stdout.readline()
        self._bwrap.stdout.close()
        try:
            self.init_pid = int(json.loads(text)["child-pid"])
            if ready != b"ready\n":
                raise ValueError("the jail's init did not start")
        except (ValueError, KeyError):
            _, err = self._bwrap.communicate(timeout=10)
            raise RuntimeError(f"bwrap did not start: {err.decode(errors='replace')}") from None

    def host_path(self, path: str) -> Path:
        """Where ``path`` of the jail is seen from this host (its mounts included)."""
        return Path(f"/proc/{self.init_pid}/root") / path.lstrip("/")

    def argv(self, cwd: str, env: dict[str, str], command: list[str]) -> list[str]:
        """``nsenter`` command line running ``command`` inside, in ``cwd`` with exactly ``env``."""
        pairs = [f"{k}={v}" for k, v in env.items()]
        return [
            "nsenter",
            "-t",
            str(self.init_pid),
            "--mount",
            "--pid",
            "--ipc",
            "--uts",
            "--net",
            "--root",
            "--wd",
            "--",
            "env",
            "-i",
            "-C",
            cwd,
            *pairs,
            *command,
        ]

    def alive(self) -> bool:
        return self._bwrap.poll() is None

    def kill(self) -> None:
        """End every process of the session, returning once they are all gone.

        Killing the namespace's init takes the others with it, and the kernel lets the
        init end only after them: its pidfd turning readable is the moment the session
        is empty. (bwrap, killed too, may end before that.)"""
        try:
            init = os.pidfd_open(self.init_pid)
        except ProcessLookupError:
            init = None
        try:
            for pid in (self.init_pid, self._bwrap.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if init is not None:
                select.select([init], [], [], 10)
        finally:
            if init is not None:
                os.close(init)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._bwrap.wait(timeout=10)


@dataclass(eq=False)
class Command:
    """A process the service started in a runtime session, its logs and its stdin."""

    id: str
    name: str
    args: list[str]
    cwd: str
    session_id: str
    proc: subprocess.Popen[bytes]
    stdin_attached: bool
    started_at: int = field(default_factory=_ms)
    exit_code: int | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)
    bytes_written: int = 0
    stdin_closed: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)
    _open_streams: int = 2
    _stdin_lock: threading.Lock = field(default_factory=threading.Lock)

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "args": self.args,
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "exitCode": self.exit_code,
            "startedAt": self.started_at,
        }

    @property
    def done(self) -> bool:
        """Exited and every byte of its output logged."""
        return self.exit_code is not None and self._open_streams == 0

    def start_pumps(self) -> None:
        for stream, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(stream, pipe), daemon=True).start()
        threading.Thread(target=self._reap, daemon=True).start()

    def _pump(self, stream: str, pipe: Any) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = pipe.fileno()
        while True:
            data = os.read(fd, _READ_SIZE)
            text = decoder.decode(data, final=not data)
            with self.cond:
                if text:
                    self.logs.append({"stream": stream, "data": text})
                if not data:
                    self._open_streams -= 1
                self.cond.notify_all()
            if not data:
                pipe.close()
                return

    def _reap(self) -> None:
        code = self.proc.wait()
        with self.cond:
            self.exit_code = 128 - code if code < 0 else code
            self.cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.exit_code is not None, timeout)

    def write_stdin(self, data: bytes, offset: int | None, close: bool) -> int:
        """Write what of ``data`` past ``offset`` the process has not had; raise
        ``BrokenPipeError`` when it takes no input (never attached, closed, exited)."""
        with self._stdin_lock:
            if not self.stdin_attached or self.stdin_closed or self.proc.stdin is None:
                raise BrokenPipeError("command_stdin_unavailable")
            start = 0 if offset is None else max(0, self.bytes_written - offset)
            chunk = data[start:]
            if chunk:
                try:
                    self.proc.stdin.write(chunk)
                    self.proc.stdin.flush()
                except (BrokenPipeError, ValueError):
                    self.stdin_closed = True
                    raise BrokenPipeError("command_stdin_unavailable") from None
                self.bytes_written += len(chunk)
            if close:
                self.stdin_closed = True
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            return self.bytes_written

    def child_pid(self) -> int | None:
        """Host pid of the command itself (nsenter forks it into the pid namespace)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
                if kids.split():
                    return int(kids.split()[0])
            if self.proc.poll() is not None:
                return None
            time.sleep(0.005)
        return None

    def end_after(self, seconds: float) -> None:
        """The request's ``timeout``: killed when still running ``seconds`` after it started."""

        def watch() -> None:
            if not self.wait(seconds):
                # The whole group (nsenter's session): the command itself is nsenter's
                # child, and must not outlive it holding the output pipes.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)

        threading.Thread(target=watch, daemon=True).start()

    def kill(self, signum: int) -> None:
        pid = self.child_pid()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid if pid is not None else self.proc.pid, signum)


class Disk:
    """A sandbox's persistent storage: what ``/vercel/sandbox`` and ``/tmp`` hold."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reset()

    def reset(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        for sub in ("sandbox", "tmp"):
            (self.root / sub).mkdir(parents=True, mode=0o777)
            os.chmod(self.root / sub, 0o1777 if sub == "tmp" else 0o755)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def spawn(
    jail: Jail, session_id: str, request: dict[str, Any], sandbox_env: dict[str, str]
) -> Command:
    """Start a command from a ``cmd`` request body (``command``, ``args``, ``cwd``, ``env``)
    with the sandbox's own variables under the request's."""
    env = {"PATH": _PATH, "HOME": SANDBOX_CWD, "LANG": "C.UTF-8", "USER": "vercel-sandbox"}
    env.update(sandbox_env)
    env.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    name = str(request["command"])
    args = [str(a) for a in request.get("args") or []]
    cwd = str(request.get("cwd") or SANDBOX_CWD)
    attach = bool(request.get("attachStdin"))
    proc = subprocess.Popen(
        jail.argv(cwd, env, [name, *args]),
        stdin=subprocess.PIPE if attach else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    command = Command(new_id("cmd"), name, args, cwd, session_id, proc, attach)
    command.start_pumps()
    if request.get("timeout"):
        command.end_after(int(request["timeout"]) / 1000)
    return command


def decode_stdin(body: dict[str, Any]) -> bytes:
    raw = body.get("data")
    return base64.b64decode(raw) if isinstance(raw, str) else b""
