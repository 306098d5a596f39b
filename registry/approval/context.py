"""Where a command runs is part of what it does, and of what a person approves.

``rm -rf *`` deletes a build directory's contents in ``./build`` and the whole
system in ``/``. Contract:

* :func:`run_directory` is the directory a ``terminal`` call runs in: its
  ``workdir`` (resolved against the session's directory the way ``cd`` does,
  logically) or else the session's directory; None when neither is known
  (the session shell has not started: it starts in its backend's directory).
* :func:`with_directory` adds that directory to the environment the analysis
  reads (``PWD``), so relative targets resolve where they will run.
* :func:`in_directory` is the command as it is approved, pending and granted:
  ``cd -- DIR && COMMAND``, so an approval names the directory to the person
  who answers it and a once-grant for one directory is not spent in another.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping

__all__ = ["in_directory", "run_directory", "with_directory"]


def run_directory(session_cwd: str | None, workdir: str | None) -> str | None:
    """The directory the command runs in (module docstring); relative only when ``workdir``
    is relative and the session's directory is unknown."""
    if not workdir:
        return session_cwd or None
    if posixpath.isabs(workdir) or not session_cwd:
        base = workdir
    else:
        base = posixpath.join(session_cwd, workdir)
    # `cd` is logical: `..` drops the last name (as posixpath.normpath does), and `//x`
    # is kept as POSIX allows.
    return posixpath.normpath(base)


def with_directory(env: Mapping[str, str] | None, cwd: str | None) -> dict[str, str] | None:
    """``env`` with ``PWD`` set to ``cwd`` when that is absolute (a relative one says nothing
    about where the command runs)."""
    if cwd is None or not posixpath.isabs(cwd):
        return dict(env) if env is not None else None
    return {**(env or {}), "PWD": cwd}


def in_directory(command: str, cwd: str | None) -> str:
    """The command qualified by its directory (``command`` itself when that is unknown)."""
    return command if cwd is None else f"cd -- {shlex.quote(cwd)} && {command}"
