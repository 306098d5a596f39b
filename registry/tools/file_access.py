"""Reaching files in a session's sandbox: paths, confinement, bounded reads, error results.

Shared by the model-facing ``read_file``/``write_file`` tools and the worker's
byte transfers (``upload``/``download``). Contracts:

* Files are reached only through the sandbox's own :meth:`Environment.read_file`
  and :meth:`Environment.write_file`, so a path means what it means inside the
  sandbox and reaches only what the sandbox reaches.
* :func:`resolve_path` makes a path absolute the way the session sees it: a
  relative path (and ``~``) is resolved against the session's cwd (and ``$HOME``).
* :func:`confine` refuses paths inside the worker's own state (``FilePolicy.protected``)
  on backends whose sandbox is the worker's machine, following symlinks.
* :func:`iter_chunks` reads a file in pieces and raises :class:`FileTooLarge` as
  soon as it passes the size cap, never holding more than the cap.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from environments.base import Environment
from environments.errors import Denied, Invalid, NotFound, SbxError

CHUNK = 1 << 20
"""Bytes read from a sandbox (and moved through the ledger) at a time."""
DEFAULT_MAX_FILE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class FilePolicy:
    """The worker's limits on files (``ctx.components["files"]``)."""

    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    """The largest file read, written, uploaded or downloaded (``SBX_MAX_FILE_BYTES``)."""
    protected: tuple[str, ...] = ()
    """Host directories no file operation may reach (the worker's home)."""


class FileTooLarge(Invalid):
    """The file is larger than the operator's cap; nothing was transferred."""


class InvalidPath(Invalid):
    """The path cannot name a file (empty, NUL byte, relative without a known cwd)."""


class ProtectedPath(Denied):
    """The path is inside the worker's own state."""


def policy_of(components: dict[str, Any]) -> FilePolicy:
    """The worker's :class:`FilePolicy`, or the defaults."""
    policy = components.get("files")
    return policy if isinstance(policy, FilePolicy) else FilePolicy()


def too_large(size: int | str, limit: int) -> FileTooLarge:
    return FileTooLarge(
        f"the file is {size} bytes, over the limit of {limit} (SBX_MAX_FILE_BYTES); "
        "nothing was transferred"
    )


def _session_view(env: Environment) -> tuple[str, dict[str, str]]:
    """The session's cwd and exported variables (starting its shell if none ran yet)."""
    state = env.session_state()
    if state is None:
        env.exec("true", timeout=30.0)  # the shell reports its state once it ran something
        state = env.session_state()
    if state is None or not state.cwd:
        raise InvalidPath("the session's working directory is unknown: give an absolute path")
    return state.cwd, state.env


def resolve_path(env: Environment, path: str) -> str:
    """``path`` as an absolute, normalised path in the session's sandbox.

    Raises :class:`InvalidPath` for an empty path, a NUL byte, or ``~`` without ``$HOME``.
    """
    if not path or "\x00" in path:
        raise InvalidPath("a path must be a non-empty string without NUL bytes")
    if path == "~" or path.startswith("~/"):
        home = _session_view(env)[1].get("HOME")
        if not home:
            raise InvalidPath("$HOME is not set in the session: give an absolute path")
        path = home + path[1:]
    elif not path.startswith("/"):
        path = posixpath.join(_session_view(env)[0], path)
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")  # normpath keeps a leading "//"


def confine(env: Environment, path: str, policy: FilePolicy) -> None:
    """Raise :class:`ProtectedPath` when ``path`` reaches the worker's own state.

    Applies to backends whose sandbox sees the worker's file system
    (:attr:`Environment.processes_on_worker_host`); symlinks are followed.
    """
    if not env.processes_on_worker_host or not policy.protected:
        return
    seen = {posixpath.normpath(path), os.path.realpath(path)}
    for root in policy.protected:
        roots = {posixpath.normpath(root), os.path.realpath(root)}
        for candidate in seen:
            if any(candidate == r or candidate.startswith(r.rstrip("/") + "/") for r in roots):
                raise ProtectedPath(f"{path} is inside the worker's own state; refused")


def iter_chunks(
    env: Environment, path: str, max_bytes: int, chunk: int = CHUNK
) -> Iterator[bytes]:
    """The bytes of ``path`` in pieces of at most ``chunk``; :class:`FileTooLarge` once they
    pass ``max_bytes`` (before that piece is yielded). Errors of ``read_file`` pass through."""
    offset = 0
    while True:
        piece = env.read_file(path, offset, chunk)
        offset += len(piece)
        if offset > max_bytes:
            raise too_large(f"more than {max_bytes}", max_bytes)
        if piece:
            yield piece
        if len(piece) < chunk:
            return


def file_error(exc: BaseException, path: str) -> dict[str, Any]:
    """``{"error", "status"}`` for a failed file operation on ``path`` (never a traceback)."""
    if isinstance(exc, SbxError):
        return {"error": str(exc), "status": exc.status}
    if isinstance(exc, FileNotFoundError):
        return {"error": f"no such file: {path}", "status": NotFound.status}
    if isinstance(exc, IsADirectoryError):
        return {"error": f"{path} is a directory", "status": Invalid.status}
    if isinstance(exc, NotADirectoryError):
        return {"error": f"a parent of {path} is not a directory", "status": NotFound.status}
    if isinstance(exc, PermissionError):
        return {"error": f"permission denied in the sandbox: {path}", "status": Denied.status}
    return {"error": f"{type(exc).__name__}: {exc}", "status": "error"}
