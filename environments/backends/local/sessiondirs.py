"""A session's private directories on the host, for the local backend's jail.

``<state_dir>/<key>/`` holds ``tmp`` (the jail's ``/tmp``), ``home`` (its
``$HOME``), ``proc`` (background processes' output and status files), the
session id (``session``), and ``lock``: every jail of the session holds a shared
lock on it while it runs, so the directories are removed only once nothing of
the session runs any more.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import itertools
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def session_key(session_id: str) -> str:
    """The name of a session's directory: never the session id itself (any characters)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def private_dir(path: Path) -> Path:
    """``path`` as an existing directory of ours, mode 0700 (created with its missing
    parents, each 0700 too whatever the umask: ``mkdir(parents=True)`` would give them
    ``0777 & ~umask``).

    Raises ``PermissionError`` when it is a symlink, not a directory, or another user's.
    """
    missing = [path, *itertools.takewhile(lambda p: not os.path.lexists(p), path.parents)]
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PermissionError(f"{path} is not a private directory of this user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


@functools.cache
def default_state_dir() -> Path:
    """Where jails keep session directories when no ``state_dir`` is configured: a fresh
    private directory of this process (a random name, never a predictable one)."""
    return Path(tempfile.mkdtemp(prefix="sbx-jails-"))


@dataclass(frozen=True)
class SessionDirs:
    """The host directories of one session's jail."""

    root: Path

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def log(self) -> Path:
        """What bubblewrap said when it last started the session shell's jail."""
        return self.root / "jail.log"

    def jail_log(self) -> str:
        """The last line of :attr:`log` ("" when bubblewrap said nothing)."""
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:500] if lines else ""

    @classmethod
    def create(cls, state_dir: Path, session_id: str) -> SessionDirs:
        """The session's directories, created (0700) if missing."""
        dirs = cls(private_dir(state_dir) / session_key(session_id))
        for path in (dirs.root, dirs.tmp, dirs.home, dirs.proc):
            private_dir(path)
        label = dirs.root / "session"
        if not label.exists():
            fd = os.open(label, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(session_id)
        return dirs

    def hold(self) -> int:
        """A descriptor holding a shared lock on the session: give it to a jail (``--sync-fd``)
        and close it here."""
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    def touch(self) -> None:
        """Record use now (the orphan sweep removes sessions idle for long)."""
        with contextlib.suppress(OSError):
            os.utime(self.lock)

    def remove_if_unused(self) -> bool:
        """Remove the directories unless a jail of the session still runs; True if removed."""
        try:
            fd = os.open(self.lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            shutil.rmtree(self.root, ignore_errors=True)
            return True
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            shutil.rmtree(self.root, ignore_errors=True)
            return True
        finally:
            os.close(fd)


def reap_sessions(state_dir: Path, max_idle: float, keep: Callable[[str], bool]) -> list[str]:
    """Remove session directories under ``state_dir`` unused for ``max_idle`` seconds whose
    session ``keep`` does not claim and in which nothing runs; return their session ids."""
    removed: list[str] = []
    if not state_dir.is_dir():
        return removed
    now = time.time()
    for root in state_dir.iterdir():
        dirs = SessionDirs(root)
        try:
            session_id = (root / "session").read_text()
            idle = now - os.stat(dirs.lock).st_mtime
        except OSError:
            continue
        if idle > max_idle and not keep(session_id) and dirs.remove_if_unused():
            removed.append(session_id)
    return removed
