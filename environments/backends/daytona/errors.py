"""The error classes the daytona backend raises beyond :mod:`environments.errors`.

Each is one clear line that never carries a credential; they derive from
:class:`~environments.errors.SandboxError` and from the builtin with the same
meaning, so callers may catch either.
"""

from __future__ import annotations

from environments.errors import BackendUnavailable, SandboxError


class CredentialsMissing(BackendUnavailable):
    """No API key is configured for the service."""


class AuthenticationFailed(BackendUnavailable, PermissionError):
    """The service rejected the configured credentials."""


class ServiceUnreachable(BackendUnavailable, ConnectionError):
    """The service did not answer (refused, unreachable, or not within the deadline)."""


class QuotaExceeded(SandboxError):
    """The service refused to create or start a sandbox: a quota or rate limit is exhausted."""


class SandboxNotFound(SandboxError, LookupError):
    """The sandbox does not exist (any more) on the service."""
