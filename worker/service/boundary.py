"""Where errors become tool results: the worker side's one boundary to the wire.

Every task verifies its caller (:mod:`worker.service.auth`) and turns whatever
sbx error it meets into ``{"error", "status"}`` with :func:`error_fields`; the
status is the error class's own (:class:`~environments.errors.SbxError`), so
the same failure reads the same from every task. A denial never carries
protected data (no command, no output, no other session's name).
"""

from __future__ import annotations

from typing import Any

from environments.errors import Denied, SbxError
from process_registry.models import PermissionDenied
from registry.results import to_json

AUTH_FAILED = "session token missing or invalid for this session"


class CallerDenied(Denied):
    """The caller's session id is malformed or its proof does not verify."""


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``{"error": ..., "status": ...}`` for ``exc``; unexpected errors are ``error``."""
    if isinstance(exc, PermissionDenied):
        return {
            "error": "permission denied: this session does not own that process",
            "status": exc.status,
        }
    if isinstance(exc, SbxError):
        return {"error": str(exc), "status": exc.status}
    return {"error": f"{type(exc).__name__}: {exc}", "status": "error"}


def error_result(exc: BaseException, **fields: Any) -> str:
    """:func:`error_fields` of ``exc`` (plus ``fields``) as tool-result JSON."""
    return to_json({**error_fields(exc), **fields})
