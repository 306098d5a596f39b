"""sbx's error root, and the errors raised by sandbox backends.

Every error sbx raises derives from :class:`SbxError`. It lives here, in the
bottom layer, so that every package can derive from it. Each class carries the
status a tool result reports for it on the wire (``status``) and the exit code
the CLI gives it (``exit_code``); the worker turns an :class:`SbxError` into a
tool result at one boundary and the CLI maps statuses to exit codes in one
table. Errors that have an obvious builtin meaning also derive from that
builtin, so callers may catch either (``except FileNotFoundError`` catches a
missing workdir).
"""

from __future__ import annotations

import errno
from typing import ClassVar

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_DENIED = 3
EXIT_NOT_FOUND = 4


class SbxError(Exception):
    """Root of every error sbx raises; ``status`` and ``exit_code`` say how it is reported."""

    status: str = "error"
    exit_code: ClassVar[int] = EXIT_FAILURE


class Denied(SbxError, PermissionError):
    """The caller may not do this (a missing or wrong credential, another session's data)."""

    status = "denied"
    exit_code = EXIT_DENIED


class NotFound(SbxError, LookupError):
    """What the caller named does not exist (or is not visible to it)."""

    status = "not_found"
    exit_code = EXIT_NOT_FOUND


class Invalid(SbxError, ValueError):
    """The request is malformed: a bad id, argument or value."""

    status = "invalid"
    exit_code = EXIT_USAGE


class Unsupported(SbxError, NotImplementedError):
    """The backend cannot do what was asked (e.g. a pty where it has none)."""

    status = "unsupported"
    exit_code = EXIT_USAGE


class SandboxError(SbxError):
    """Root of every error raised by ``environments``."""


class BackendUnavailable(SandboxError, RuntimeError):
    """The backend cannot be used on this machine (SDK missing, engine down, no credentials)."""


class CredentialsMissing(BackendUnavailable):
    """The backend needs credentials and none were configured."""


class AuthenticationFailed(BackendUnavailable, PermissionError):
    """The backend's service rejected the configured credentials."""


class ServiceUnreachable(BackendUnavailable, ConnectionError):
    """The backend's service did not answer (network, DNS, TLS, or it is down)."""


class QuotaExceeded(SandboxError):
    """The backend's service refused to create or run more (quota, rate or plan limit)."""


class UnknownBackend(SandboxError, LookupError):
    """No backend is registered under the requested name."""

    status = "invalid"
    exit_code = EXIT_USAGE


class SandboxNotFound(SandboxError, LookupError):
    """The sandbox a handle names does not exist (any more)."""


class WorkdirNotFound(SandboxError, FileNotFoundError):
    """The requested working directory does not exist in the sandbox; nothing was run.
    ``cwd``, where known, is the session's working directory now."""

    def __init__(self, message: str, *, cwd: str | None = None) -> None:
        super().__init__(message)
        self.cwd = cwd


class InvalidCommand(SandboxError, ValueError):
    """The command cannot be passed to a shell (for example it contains a NUL byte)."""


class SandboxDead(SandboxError, ConnectionError):
    """The sandbox or its session shell is gone and could not be brought back."""


class NotRegularFile(Invalid, OSError):
    """A FIFO, socket or device where a file was expected: refused, nothing was read
    or written (``invalid``; an ``OSError`` too, so callers tolerating unreadable
    files tolerate this one)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not a regular file (a FIFO, socket or device): refused")
        self.errno = errno.EINVAL
        self.filename = path

    def __str__(self) -> str:
        return str(self.args[0])  # the sentence, not OSError's "[Errno 22] ..." form
