"""The private runtime directory of one ``SBX_HOME``: never a predictable name in /tmp.

It holds what must stay out of ``SBX_HOME`` (no secret may be written there,
and raw process output may hold secrets) or cannot fit in it: the spool of
local processes' raw output, the local jails' session directories, and the
embedded broker's socket when ``SBX_HOME`` is too deep for a socket path.

Where: ``$XDG_RUNTIME_DIR/sbx-<tag>`` when ``XDG_RUNTIME_DIR`` is a private
directory of this user (no one else can create names there); otherwise a
directory with a random name made by ``mkdtemp`` in the temp directory, whose
path is recorded in ``SBX_HOME/runtime-dir`` so that every process of that home
finds the same one. A recorded directory that is gone, or no longer a private
directory of ours (squatted, swapped for a link), is replaced by a fresh one:
a squatter costs a new name, never a failure or a shared directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from .private_dirs import make_private_dirs

_RECORD = "runtime-dir"


def _private(path: Path) -> bool:
    """A real directory (not a link) of this user that no one else may enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def runtime_dir(home: Path) -> Path:
    """The runtime directory of ``home`` (created, 0700); see the module docstring.

    Raises ``OSError`` when ``home`` cannot be created or written.
    """
    make_private_dirs(home)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and _private(Path(xdg)):
        tag = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
        path = Path(xdg) / f"sbx-{tag}"
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        if _private(path):
            return path
    record = home / _RECORD
    lock_fd = os.open(home / f".{_RECORD}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        with contextlib.suppress(OSError, ValueError):
            recorded = Path(record.read_text().strip())
            if recorded.is_absolute() and _private(recorded):
                return recorded
        path = Path(tempfile.mkdtemp(prefix="sbx-"))
        tmp = home / f".{_RECORD}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(str(path))
        os.replace(tmp, record)
        return path
    finally:
        os.close(lock_fd)
