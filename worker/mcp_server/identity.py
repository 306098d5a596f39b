"""Who an MCP connection acts as: an sbx session id and its token.

Over stdio, the configured session (:func:`configured_identity`). Over HTTP, the
request's ``Authorization`` header (:func:`identity_from_header`), in either form:

* ``Basic base64(<session id>:<token>)`` -- the session id as user, the token as password;
* ``Bearer <session id>/<token>``.

Tokens never appear in a ``repr``, a log line or an error message.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from process_registry.tokens.formats import InvalidSessionId, validate_session_id
from worker.errors import Denied


class AuthError(Denied):
    """The request names no session, or not in a form sbx reads (answered 401)."""


@dataclass(frozen=True)
class Identity:
    """An sbx session and its token (``None``: the client finds one, see SandboxClient)."""

    session_id: str
    token: str | None = field(default=None, repr=False)


def configured_identity(session_id: str, token: str | None) -> Identity:
    """The stdio connection's identity. Raises :class:`AuthError` for a malformed id."""
    try:
        return Identity(validate_session_id(session_id), token or None)
    except InvalidSessionId as exc:
        raise AuthError(str(exc)) from None


def identity_from_header(header: str | None) -> Identity:
    """The identity an ``Authorization`` header carries. Raises :class:`AuthError`."""
    if not header:
        raise AuthError("no Authorization header: send the sbx session id and its token")
    scheme, _, credentials = header.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise AuthError("the Basic credentials are not base64 of 'session:token'") from None
        # Session ids may hold ':'; tokens never do: the token follows the last one.
        session_id, sep, token = decoded.rpartition(":")
    elif scheme.lower() == "bearer":
        session_id, sep, token = credentials.partition("/")
    else:
        raise AuthError("the Authorization header must be Basic or Bearer (see docs)")
    if not sep or not session_id or not token:
        raise AuthError("the Authorization header must carry a session id and its token")
    try:
        return Identity(validate_session_id(session_id), token)
    except InvalidSessionId as exc:
        raise AuthError(str(exc)) from None
