"""Opening a jail's files from the worker's side, as the jail would and never further.

A path names a file *inside* the jail. The worker opens it on the host through
the mount it falls in (the innermost one): a host directory bound into the
jail resolves to that directory; anything else (``/proc``, ``/dev``, a masked
path, a place no mount shows) is not reachable. Below the mount every
component is opened with ``O_NOFOLLOW``: a symlink the sandbox planted -- to
the worker's secret key, say -- is refused (``ELOOP``), never followed with the
worker's view of the file system. Writing into a read-only mount is ``EROFS``.
"""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Sequence

from environments.backends.local.jail import Mount

_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


class JailFiles:
    """Files of one jail, opened from the host through its ``mounts``."""

    def __init__(self, mounts: Sequence[Mount]) -> None:
        self.mounts = list(mounts)

    def _locate(self, path: str) -> tuple[Mount, list[str]]:
        if not posixpath.isabs(path) or "\x00" in path:
            raise FileNotFoundError(errno.ENOENT, "not an absolute path in the sandbox", path)
        norm = posixpath.normpath(path)
        last: Mount | None = None
        for m in self.mounts:
            if _under(norm, m.dest):
                last = m
        if last is None or not last.host_backed:
            raise FileNotFoundError(errno.ENOENT, "not reachable in the sandbox's files", path)
        rest = norm[len(last.dest) :] if last.dest != "/" else norm
        return last, [part for part in rest.split("/") if part]

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor for ``path`` in the jail (``os.open`` flags and mode).

        Raises ``FileNotFoundError`` for a path no host directory of the jail holds,
        ``OSError(ELOOP)`` for a symlink on the way, ``OSError(EROFS)`` for a write
        into a read-only mount, and what ``os.open`` raises. Opens whatever file is
        there, a FIFO too (a pty's input is one), and blocks as ``os.open`` does
        unless ``flags`` has ``O_NONBLOCK``: for a file's bytes go through
        :meth:`~environments.backends.local.files.LocalFiles.open`, which never
        blocks and refuses anything but a regular file.
        """
        mount, parts = self._locate(path)
        if flags & _WRITES and mount.kind != "bind":
            raise OSError(errno.EROFS, "read-only in the sandbox", path)
        flags |= os.O_NOFOLLOW | os.O_CLOEXEC
        if not parts:
            return os.open(mount.source, flags, mode)
        fd = os.open(mount.source, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                nxt = os.open(
                    part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
                os.close(fd)
                fd = nxt
            return os.open(parts[-1], flags, mode, dir_fd=fd)
        finally:
            os.close(fd)

    def host_path(self, path: str) -> str:
        """Where ``path`` of the jail is on the host (by name only: open with :meth:`open`).

        Raises ``FileNotFoundError`` as :meth:`open` does for an unreachable path.
        """
        mount, parts = self._locate(path)
        return posixpath.join(mount.source, *parts)

    def parent(self, path: str, *, write: bool) -> tuple[int, str]:
        """``(descriptor, name)``: an ``O_PATH`` descriptor of the directory holding
        ``path`` (opened as :meth:`open` would) and ``path``'s last component. The caller
        closes the descriptor. ``write``: refuse a read-only mount (``EROFS``)."""
        norm = posixpath.normpath(path)
        head, name = posixpath.split(norm)
        if not name:
            raise IsADirectoryError(errno.EISDIR, "not a file in the sandbox", path)
        mount, _ = self._locate(norm)
        if write and mount.kind != "bind":
            raise OSError(errno.EROFS, "read-only in the sandbox", path)
        return self.open(head, os.O_PATH | os.O_DIRECTORY), name

    def unlink(self, path: str) -> None:
        """Remove the file ``path`` of the jail (a symlink itself, never its target)."""
        fd, name = self.parent(path, write=True)
        try:
            os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def replace(self, source: str, target: str) -> None:
        """Rename ``source`` over ``target``; both in one directory of the jail."""
        fd, old = self.parent(source, write=True)
        try:
            if posixpath.dirname(posixpath.normpath(target)) != posixpath.dirname(
                posixpath.normpath(source)
            ):
                raise OSError(errno.EXDEV, "replace only within one directory", target)
            os.replace(old, posixpath.basename(target), src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)
