"""Directories sbx creates are 0700, their missing parents included, whatever the umask.

A leaf (the standard library only): the token keyring, the client's revocation mirror
and the embedded broker create directories too, and may import nothing heavier.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def make_private_dirs(path: Path) -> None:
    """``mkdir -p path`` where every directory created (``path`` and each missing
    ancestor) is 0700 whatever the umask; existing directories are left as they are.

    ``Path.mkdir(parents=True, mode=0o700)`` gives only ``path`` that mode: its missing
    parents get ``0777 & ~umask``, and the parent is often ``SBX_HOME`` itself (0777
    under umask 000: anyone could replace the secret key in it). Like ``exist_ok=True``
    it accepts an existing directory (or a link to one); raises ``OSError`` when a
    directory cannot be created, ``NotADirectoryError`` when ``path`` is something else.
    """
    missing: list[Path] = []
    current = Path(os.path.abspath(path))
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a racing creator; checked by callers
            os.mkdir(directory, 0o700)
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a directory")
