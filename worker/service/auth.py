"""Who is calling: a message's proofs checked against the keyring and the revocation epoch.

Every task (tool call, approval, receipt operation) runs inside a
:func:`caller_scope` for its task id: :func:`authenticate` checks the
message's :class:`~worker.protocol.mac.CallProof` (and that the message names
that very task id, so a captured message cannot be replayed under another
one) and remembers the verified session token, with which the task's answer
is then sealed (:meth:`CallerScope.seal`) for the caller alone to open.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from pydantic import BaseModel, ValidationError

from process_registry.tokens.approver import approver_token
from process_registry.tokens.formats import InvalidSessionId, TokenInfo, validate_session_id
from registry.results import tool_error
from worker.protocol.mac import (
    MAX_CLOCK_SKEW_S,
    ApproverProof,
    CallProof,
    approver_matches,
    message_body,
    proof_matches,
    seal_result,
)
from worker.protocol.revocations import read_epoch
from worker.service.boundary import AUTH_FAILED, CallerDenied, error_result

if TYPE_CHECKING:
    from worker.service.runtime import WorkerRuntime

APPROVER_REQUIRED = (
    "approving needs the platform's approver credential (SBX_APPROVER_TOKEN); "
    "a session token or an approval id alone grants nothing"
)


@dataclass
class CallerScope:
    """The task being answered and, once verified, its caller's session token."""

    task_id: str | None
    token: str | None = None

    def seal(self, result: str) -> str:
        """``result`` sealed for the verified caller (as is when none was verified)."""
        if self.token is None or self.task_id is None:
            return result
        return seal_result(self.token, self.task_id, result)


_scope: ContextVar[CallerScope | None] = ContextVar("sbx_caller_scope", default=None)


@contextlib.contextmanager
def caller_scope(task_id: str | None) -> Iterator[CallerScope]:
    """The scope of answering task ``task_id`` on this thread."""
    scope = CallerScope(task_id)
    reset = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(reset)


def _epoch(runtime: WorkerRuntime, session_id: str, known: int | None = None) -> int:
    if known is not None:
        return known
    try:
        return read_epoch(runtime.ledger.client, session_id, runtime.settings.home)
    except redis.RedisError:
        raise CallerDenied(
            "cannot check the session's revocation now (ledger unreachable)"
        ) from None


def session_token_of(
    runtime: WorkerRuntime,
    kind: str,
    message: BaseModel,
    session_id: str,
    proof: CallProof | None,
    epoch: int | None = None,
) -> str:
    """The session token ``proof`` was made with, if it is valid now; else :class:`CallerDenied`.

    Valid: a key in the keyring, not expired, not revoked (the session's
    epoch: ``epoch`` when the caller read it from the ledger just now, else read
    here), made within the claim window (issued no more than ``claim_ttl`` ago and
    no more than ``MAX_CLOCK_SKEW_S`` ahead: the ledger keeps claims that long and
    more, ``worker.protocol.ledger.claim_lifetime``), and its MAC over ``message``
    matches. A proof outside the window is denied saying so (the caller's clock).
    """
    try:
        validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise CallerDenied(str(exc)) from None
    now = time.time()
    if proof is None:
        raise CallerDenied(AUTH_FAILED)
    if proof.issued > now + MAX_CLOCK_SKEW_S:
        # Said plainly (before any key is checked, so it tells a forger nothing): the
        # usual cause is a caller's clock that is wrong, not an attack.
        raise CallerDenied(
            f"the call was signed {proof.issued - now:.0f} s ahead of this worker's clock, "
            f"more than the {MAX_CLOCK_SKEW_S} s allowed: check the caller's clock (NTP)"
        )
    if proof.issued <= now - runtime.settings.claim_ttl:
        raise CallerDenied(
            f"the call was signed more than {runtime.settings.claim_ttl} s ago by this "
            "worker's clock (SBX_CLAIM_TTL): a replay, or the caller's clock is behind"
        )
    signer = runtime.signer
    info = TokenInfo(proof.kid, proof.expires)
    body = message_body(kind, message)
    if info.v1:
        # The epoch is read only for a token that matches: a v1 token dies with revocation.
        match = next((t for t in signer.candidates(session_id, info) if
                      proof_matches(t, proof, body)), None)  # fmt: skip
        if match is not None and _epoch(runtime, session_id, epoch) == 0:
            return match
        raise CallerDenied(AUTH_FAILED)
    if signer.keyring.get(info.kid) is None or info.expires <= now:
        raise CallerDenied(AUTH_FAILED)
    for token in signer.candidates(session_id, info, _epoch(runtime, session_id, epoch)):
        if proof_matches(token, proof, body):
            return token
    raise CallerDenied(AUTH_FAILED)


def authenticate(
    runtime: WorkerRuntime,
    kind: str,
    message: BaseModel,
    session_id: str,
    proof: CallProof | None,
    call_id: str,
    epoch: int | None = None,
) -> str:
    """Verify the caller of the task in scope; its session token (also kept to seal the answer).

    ``epoch``: the session's revocation epoch, when the caller read it from the ledger
    just now. Raises :class:`CallerDenied` for a bad proof, and for a message naming
    another call id than the task it arrived as.
    """
    scope = _scope.get()
    if scope is not None and scope.task_id is not None and scope.task_id != call_id:
        raise CallerDenied(AUTH_FAILED)
    token = session_token_of(runtime, kind, message, session_id, proof, epoch)
    if scope is not None:
        scope.token = token
    return token


def check_approver(
    runtime: WorkerRuntime, kind: str, message: BaseModel, proof: ApproverProof | None
) -> None:
    """Return when ``proof`` was made with a valid approver credential, else raise
    :class:`CallerDenied`."""
    if proof is not None:
        credential = approver_token(runtime.signer.keyring, proof.kid)
        body = message_body(kind, message)
        if credential is not None and approver_matches(credential, proof, body):
            return
    raise CallerDenied(APPROVER_REQUIRED)


M = TypeVar("M", bound=BaseModel)


def verified_message(
    model: type[M], raw: Any, runtime: WorkerRuntime, kind: str, what: str
) -> M | str:
    """``raw`` as a ``model`` (carrying ``session_id``, ``call_id`` and ``proof``) whose
    proof over ``kind`` :func:`authenticate` accepts; else the result that answers it:
    ``invalid`` naming the problems of a malformed ``what``, or ``denied``."""
    try:
        message = model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        return tool_error(f"malformed {what}: {problems}", status="invalid")
    fields: Any = message  # every session message has these fields
    try:
        authenticate(runtime, kind, message, fields.session_id, fields.proof, fields.call_id)
    except CallerDenied as exc:
        return error_result(exc)
    return message
