"""The processes of one fake sandbox: a bubblewrap instance with its own namespaces.

A started sandbox is one ``bwrap`` instance (pid, ipc and uts namespaces, and a
network namespace holding only loopback when the sandbox blocks all network).
The host's ``/`` is read-only inside; the sandbox's own directory on the host
provides the writable ``/home/daytona`` (its home and work directory) and
``/tmp``, so files survive a stop and a start as they do in Daytona. Every
process of the sandbox (commands, PTY shells) enters the instance with
``nsenter``; stopping the sandbox kills the namespace's init, which takes every
process of the sandbox with it -- detached ones included.

Needs root (or a kernel that lets bwrap and nsenter use user namespaces).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

HOME = "/home/daytona"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": HOME,
    "LANG": "C.UTF-8",
    "USER": "daytona",
}
# Runs the command in the requested directory; 126 (like a failed exec) when it is missing.
_IN_DIR = (
    'cd -- "$1" 2>/dev/null || { echo "chdir $1: no such directory" >&2; exit 126; }; '
    'shift; exec "$@"'
)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


class Jail:
    """The namespaces of one sandbox; ``root`` is its directory on the host, ``env`` the
    variables every process in it gets (the sandbox's environment, as its daemon has)."""

    def __init__(
        self, root: Path, hostname: str, *, block_network: bool, env: dict[str, str]
    ) -> None:
        self.root = root
        self.env = env
        self.hostname = hostname
        self.block_network = block_network
        self.bwrap_pid = 0
        self.init_pid = 0
        for sub in ("home", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(root / "tmp", 0o1777)

    @property
    def running(self) -> bool:
        return self.init_pid > 0 and _alive(self.init_pid)

    def start(self) -> None:
        """Start the instance (a no-op when it runs). Raises ``RuntimeError`` if bwrap fails."""
        if self.running:
            return
        argv = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        argv += ["--hostname", self.hostname]
        if self.block_network:
            argv.append("--unshare-net")
        argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(self.root / "tmp"), "/tmp"]
        argv += ["--tmpfs", "/home", "--bind", str(self.root / "home"), HOME]
        read_fd, write_fd = os.pipe()
        # The command says "ready" once it runs: bwrap reports its pid before the sandbox's
        # file system and working directory are in place, and a process entering earlier
        # lands in a half-built root (or a working directory that is not there yet).
        argv += ["--info-fd", str(write_fd), "--", "/bin/sh", "-c"]
        argv.append("echo ready; exec >/dev/null; trap 'exit 0' TERM; while :; do sleep 3600; done")
        log = self.root / "bwrap.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                argv,
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd="/",
                start_new_session=True,
            )
        os.close(write_fd)
        with os.fdopen(read_fd) as info:
            text = info.read()
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        proc.stdout.close()
        try:
            self.init_pid = int(json.loads(text)["child-pid"])
            if ready != b"ready\n":
                raise ValueError("the sandbox's command did not start")
        except (ValueError, KeyError):
            self.init_pid = 0
            proc.kill()
            proc.wait(timeout=10)
            raise RuntimeError(f"bwrap did not start: {log.read_text(errors='replace')}") from None
        self.bwrap_pid = proc.pid
        # Reap bwrap when it ends so no zombie is left in the fake's process.
        threading.Thread(target=proc.wait, daemon=True, name="fake-daytona-reaper").start()

    def stop(self) -> None:
        """Kill every process of the sandbox and wait until the namespace is gone."""
        for pid in (self.init_pid, self.bwrap_pid):
            if pid > 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while self.init_pid and _alive(self.init_pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        self.init_pid = self.bwrap_pid = 0

    def destroy(self) -> None:
        """Stop the instance and remove the sandbox's files."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def command(self, argv: list[str], env: dict[str, str], cwd: str = HOME) -> list[str]:
        """The host command line that runs ``argv`` inside the sandbox, in ``cwd``."""
        if not self.running:
            raise RuntimeError("the sandbox is not running")
        environment = [f"{k}={v}" for k, v in {**BASE_ENV, **self.env, **env}.items()]
        return [
            "nsenter", "-t", str(self.init_pid),
            "--pid", "--mount", "--ipc", "--uts", "--net", "--root", "--wd",
            "--", "/usr/bin/env", "-i", *environment,
            "/bin/sh", "-c", _IN_DIR, "sbx-fake-cwd", cwd, *argv,
        ]  # fmt: skip

    def host_path(self, path: str) -> Path:
        """Where the sandbox path ``path`` lives on the host.

        Raises ``PermissionError`` for paths outside the sandbox's writable directories
        (the read-only host root is not served by the fake's file API).
        """
        norm = os.path.normpath(path if path.startswith("/") else f"{HOME}/{path}")
        for inside, outside in ((HOME, "home"), ("/tmp", "tmp")):
            if norm == inside or norm.startswith(inside + "/"):
                return self.root / outside / os.path.relpath(norm, inside)
        raise PermissionError(f"permission denied: {path}")
