"""Exceptions raised by sandbox backends.

Every error a backend raises derives from :class:`SandboxError`; the ones that
have an obvious builtin meaning also derive from that builtin, so callers may
catch either (``except FileNotFoundError`` catches a missing workdir).
"""

from __future__ import annotations


class SandboxError(Exception):
    """Root of every error raised by ``environments``."""


class BackendUnavailable(SandboxError, RuntimeError):
    """The backend cannot be used on this machine (SDK missing, engine down, no credentials)."""


class UnknownBackend(SandboxError, LookupError):
    """No backend is registered under the requested name."""


class WorkdirNotFound(SandboxError, FileNotFoundError):
    """The requested working directory does not exist in the sandbox; nothing was run."""


class InvalidCommand(SandboxError, ValueError):
    """The command cannot be passed to a shell (for example it contains a NUL byte)."""


class SandboxDead(SandboxError, ConnectionError):
    """The sandbox or its session shell is gone and could not be brought back."""


class CredentialsMissing(BackendUnavailable):
    """The backend's service needs credentials and none were configured."""


class AuthenticationFailed(BackendUnavailable, PermissionError):
    """The backend's service rejected the configured credentials."""


class ServiceUnreachable(BackendUnavailable, ConnectionError):
    """The backend's service did not answer (down, wrong address, no network)."""


class QuotaExceeded(SandboxError):
    """The backend's service refused to create or run more (plan limits, rate limits)."""


class SandboxNotFound(SandboxError, LookupError):
    """The sandbox does not exist (any more)."""


class Unsupported(SandboxError, NotImplementedError):
    """This backend cannot do what was asked (for example a pty)."""
