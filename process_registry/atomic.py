"""Crash-safe, symlink-refusing file operations for checkpoints and receipts.

Contract:

* :func:`atomic_write` leaves the target either absent/old or complete/new,
  never torn: the bytes go to a temp file in the same directory, are fsynced,
  then renamed (or hard-linked when ``exclusive``) into place, and the
  directory is fsynced so the new name survives a power cut.
* Files are created 0600; directories made by :func:`ensure_private_dir` are 0700.
* Nothing here follows a symlink: directories are ``lstat``-checked and files
  are opened with ``O_NOFOLLOW``, so a planted link cannot redirect a write
  or a read outside the state directory.
* Ids used as file names must match ``[A-Za-z0-9_-]{1,64}`` (no path traversal).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from pathlib import Path

from .models import AlreadyExists, InvalidId, UnsafePath
from .private_dirs import make_private_dirs

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_TMP_PREFIX = ".tmp-"


def validate_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a safe file-name id, else raise :class:`InvalidId`."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidId(f"{what} must be 1-64 characters of letters, digits, '_' and '-'")
    return value


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700 and check it is a real directory we own.

    Raises :class:`UnsafePath` when ``path`` is a symlink, not a directory, or
    owned by another user (someone else could then swap files under us).
    """
    make_private_dirs(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is not a plain directory")
    if st.st_uid != os.getuid():
        raise UnsafePath(f"{path} is owned by another user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\x00" in name:
        raise InvalidId(f"bad file name {name!r}")


def atomic_write(
    directory: Path,
    name: str,
    data: bytes,
    *,
    exclusive: bool = False,
    mtime: float | None = None,
    fsync_file: bool = True,
    fsync_dir: bool = True,
) -> Path:
    """Write ``data`` to ``directory/name`` atomically (see module docstring).

    With ``exclusive`` the write fails with :class:`AlreadyExists` when the
    name exists, decided by ``os.link`` of the complete temp file: of two
    racing writers exactly one wins and the loser leaves nothing behind.
    ``mtime`` stamps the file (retention sorts by it) before it becomes visible.
    ``fsync_file``/``fsync_dir`` may be turned off for files whose loss in a
    power cut is harmless; atomicity against a crashed *process* never
    depends on them (rename is atomic in the page cache).
    """
    _check_name(name)
    tmp = directory / f"{_TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync_file:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime), follow_symlinks=False)
    target = directory / name
    try:
        if exclusive:
            try:
                # link() never replaces: the first complete file wins, even over a symlink.
                os.link(tmp, target, follow_symlinks=False)
            except FileExistsError:
                raise AlreadyExists(f"{name} already exists") from None
            os.unlink(tmp)
        else:
            # rename() replaces a symlink itself, never the file it points to.
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync_dir:
        _fsync_dir(directory)
    return target


def read_nofollow(path: Path, limit: int | None = None) -> bytes:
    """Contents of the regular file ``path``; :class:`UnsafePath` for a symlink, a special
    file, or (with ``limit``) a file larger than ``limit`` bytes, which is not read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(f"{path} is a symlink") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        if limit is not None and st.st_size > limit:
            raise UnsafePath(f"{path} is larger than {limit} bytes")
        chunks = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if limit is not None and size > limit:  # grew since fstat
                raise UnsafePath(f"{path} is larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove(path: Path) -> bool:
    """Unlink ``path`` (a symlink itself, never its target) and fsync its directory."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    _fsync_dir(path.parent)
    return True


def sweep_temp_files(directory: Path) -> int:
    """Remove temp files left by writers that died mid-write (their pid is gone)."""
    removed = 0
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as it:
        for entry in it:
            if not entry.name.startswith(_TMP_PREFIX):
                continue
            pid_part = entry.name[len(_TMP_PREFIX) :].split("-", 1)[0]
            if pid_part.isdigit() and int(pid_part) != os.getpid() and _pid_alive(int(pid_part)):
                continue
            if pid_part.isdigit() and int(pid_part) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
