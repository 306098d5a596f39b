"""What an SDK or transport error means for sbx: one line, never a credential.

:func:`translating` wraps every SDK call in :mod:`.sdk`; the SDK is only named here for
its exception types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx2
from vercel.sandbox import SandboxApiError, SandboxCredentialsError, SandboxError

from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxNotFound,
    ServiceUnreachable,
)
from environments.errors import SandboxError as SbxSandboxError


@contextlib.contextmanager
def translating(what: str, where: str = "") -> Iterator[None]:
    """Turn an SDK or transport error raised inside into the sbx error it means."""
    try:
        yield
    except (SbxSandboxError, FileNotFoundError):
        raise
    except SandboxApiError as exc:
        raise api_error(exc, what) from None
    except SandboxCredentialsError:
        raise CredentialsMissing(f"{what}: Vercel credentials could not be resolved") from None
    except httpx2.TransportError as exc:
        target = f" at {where}" if where else ""
        raise ServiceUnreachable(
            f"{what}: Vercel Sandbox API{target} unreachable ({type(exc).__name__})"
        ) from None
    except (SandboxError, OSError) as exc:
        raise SbxSandboxError(f"{what}: {type(exc).__name__}: {_first_line(exc)}") from None


def api_error(exc: SandboxApiError, what: str) -> SbxSandboxError:
    status, code = exc.status_code, exc.code or "no code"
    if status in (401, 403):
        return AuthenticationFailed(
            f"{what}: Vercel Sandbox rejected the credentials (HTTP {status}, {code}); "
            "check the token, team id and project id"
        )
    if status in (402, 429):
        return QuotaExceeded(f"{what}: Vercel Sandbox quota or rate limit (HTTP {status}, {code})")
    if status in (404, 410):
        return SandboxNotFound(f"{what}: not found on Vercel Sandbox (HTTP {status}, {code})")
    return SbxSandboxError(f"{what}: Vercel Sandbox API error (HTTP {status}, {code})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:300]
