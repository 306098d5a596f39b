"""Where errors become tool results: the worker side's one boundary to the wire.

Every task verifies its caller with :func:`verify_caller` and turns whatever
sbx error it meets into ``{"error", "status"}`` with :func:`error_fields`; the
status is the error class's own (:class:`~environments.errors.SbxError`), so
the same failure reads the same from every task. A denial never carries
protected data (no command, no output, no other session's name).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from environments.errors import Denied, SbxError
from process_registry.models import PermissionDenied
from process_registry.sessions import InvalidSessionId, SessionSigner, validate_session_id
from registry.results import to_json, tool_error

SessionMessage = TypeVar("SessionMessage", bound=BaseModel)

AUTH_FAILED = "session token missing or invalid for this session"


class CallerDenied(Denied):
    """The caller's session id is malformed or its token does not verify."""


def verify_caller(signer: SessionSigner, session_id: str, token: str | None) -> None:
    """Return when ``token`` proves ``session_id``; else raise :class:`CallerDenied`."""
    try:
        validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise CallerDenied(str(exc)) from None
    if not signer.verify(session_id, token):
        raise CallerDenied(AUTH_FAILED)


def verified_message(
    model: type[SessionMessage], raw: Any, signer: SessionSigner, what: str
) -> SessionMessage | str:
    """``raw`` as a ``model`` (a message carrying ``session_id`` and ``session_token``)
    whose caller :func:`verify_caller` accepts; else the result that answers it:
    ``invalid`` naming the problems of a malformed ``what``, or ``denied``."""
    try:
        message = model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        return tool_error(f"malformed {what}: {problems}", status="invalid")
    caller: Any = message  # every session message has both fields
    try:
        verify_caller(signer, caller.session_id, caller.session_token)
    except CallerDenied as exc:
        return error_result(exc)
    return message


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
