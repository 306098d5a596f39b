"""Punching holes in output files: a file's head deallocated, its size and offsets kept."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from collections.abc import Callable
from typing import cast

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_NO_HOLES = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
"""What ``fallocate`` says where punching holes is not supported (EINVAL: unknown mode)."""


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's 64-bit ``fallocate`` (None: not available, e.g. not glibc/musl on Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return cast("Callable[[int, int, int, int], int]", fn)


def punch_hole(fd: int, length: int) -> bool:
    """Deallocate ``[0, length)`` of the file open for writing as ``fd``, keeping its size
    (reads there return zeros); False when this file system or libc cannot."""
    fn = _fallocate()
    if fn is None:
        return False
    if fn(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in _NO_HOLES:
        return False
    raise OSError(err, os.strerror(err))
