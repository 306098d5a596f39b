"""The local backend's side of the file contract: read, write, bound and probe files.

Without a jail the paths are the host's and are opened as they are; in a jail
they are the jail's, opened through
:class:`~environments.backends.local.jailfs.JailFiles` (never past a planted
link, never into a read-only or hidden part).

Only regular files are read or written. The sandbox can put anything where
a file is expected -- its processes' output and status files are in a
directory it writes -- and a FIFO there would block the worker's ``open``
forever (a read waits for a writer, a write for a reader): every open is
non-blocking and checked with ``fstat`` before any byte moves, and a FIFO,
socket or device is refused with :class:`NotRegularFile`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat

from environments.backends.local.holes import punch_hole
from environments.backends.local.jailfs import JailFiles
from environments.base import OUTPUT_ALIGN, HeadTrim, discard_boundary
from environments.errors import NotRegularFile


class LocalFiles:
    """Files of one local sandbox; ``jail`` is None without a jail."""

    def __init__(self, jail: JailFiles | None) -> None:
        self.jail = jail

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor for the regular file ``path`` (``os.open`` flags); the caller
        closes it. Never blocks on what is there (see the module docstring).

        Raises :class:`NotRegularFile` for a FIFO, socket or device,
        ``IsADirectoryError`` for a directory, and what the open raises.
        """
        # O_NONBLOCK: opening a FIFO returns at once (or ENXIO for a write with no
        # reader) instead of waiting for the other end, which the sandbox controls.
        try:
            if self.jail is None:
                fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
            else:
                fd = self.jail.open(path, flags | os.O_NONBLOCK, mode)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO without a reader, a socket, a device
                raise NotRegularFile(path) from exc
            raise
        try:
            kind = os.fstat(fd).st_mode
            if stat.S_ISDIR(kind):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            if not stat.S_ISREG(kind):
                raise NotRegularFile(path)
            if not flags & os.O_NONBLOCK:
                # Meaningless for a regular file, but the descriptor may become a
                # process's stdout: it gets the flags asked for, nothing more.
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def unlink(self, path: str) -> None:
        """Remove ``path`` if it exists."""
        with contextlib.suppress(FileNotFoundError):
            if self.jail is None:
                os.unlink(path)
            else:
                self.jail.unlink(path)

    def read(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        """``Environment.read_file``."""
        with os.fdopen(self.open(path, os.O_RDONLY), "rb") as f:
            f.seek(offset)
            return f.read() if limit is None else f.read(limit)

    def write(self, path: str, data: bytes) -> None:
        """``Environment.write_file``: a temp file beside ``path``, renamed over it."""
        tmp = f"{path}.sbx-tmp-{os.getpid()}"
        with os.fdopen(self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            f.write(data)
        if self.jail is None:
            os.replace(tmp, path)
        else:
            self.jail.replace(tmp, path)

    def trim_head(self, path: str, cap: int, *, probe: bool = False) -> HeadTrim:
        """``Environment.trim_output_head``."""
        # O_WRONLY without O_APPEND/O_TRUNC: fallocate needs a writable fd; we never write.
        fd = self.open(path, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            size = os.fstat(fd).st_size
            cut = discard_boundary(size, cap)
            if cut == 0:
                supported = self.can_punch(os.path.dirname(path) or ".") if probe else None
                return HeadTrim(size=size, discarded=0, supported=supported)
            done = punch_hole(fd, cut)
            return HeadTrim(size=size, discarded=cut if done else 0, supported=done)
        finally:
            os.close(fd)

    def can_punch(self, directory: str) -> bool:
        """Whether files in ``directory`` can have holes punched (probed on a scratch file)."""
        scratch = f"{directory}/.sbx-probe-{secrets.token_hex(6)}"
        fd = self.open(scratch, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            return punch_hole(fd, OUTPUT_ALIGN)
        except OSError:
            return False
        finally:
            os.close(fd)
            self.unlink(scratch)

    def read_window(self, path: str, offset: int, limit: int, cap: int) -> tuple[bytes, int, int]:
        """``Environment._read_output_once``: ``(data, start, size after the read)``."""
        fd = self.open(path, os.O_RDONLY)
        try:
            start = max(offset, discard_boundary(os.fstat(fd).st_size, cap))
            parts: list[bytes] = []
            got = 0
            while got < limit:
                part = os.pread(fd, min(limit - got, 1 << 20), start + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
            return b"".join(parts), start, os.fstat(fd).st_size
        finally:
            os.close(fd)
