"""Per-message proofs and result seals: the session token never travels, yet proves the call.

* A message to a worker carries a :class:`CallProof`: the token's key id and
  expiry, when it was made, and an HMAC keyed by the *token* over the whole
  message (every field but the proofs: call id, tool, arguments, deadline,
  backend, ...). The worker recomputes the token from its key, the session
  id, that key id and expiry and the session's revocation epoch, and checks
  the MAC; anyone who read the message learns neither the token nor a way to
  change the call.
* An approval also carries an :class:`ApproverProof`: a MAC keyed by the
  approver credential over the same body.
* A worker seals each answer it puts in a mailbox with the token
  (:func:`seal_result`). Only the worker and the token's holder can do
  that; a sandbox that reaches the ledger cannot. The client opens it
  (:func:`open_result`): a missing or wrong seal is a forged result and is
  never returned. A few answers cannot be sealed (the caller was denied, a
  call declared lost by a reaper, ...): those are read as *hints* and
  replaced by the client's own fixed text (:func:`hint_result`), so no word
  of an unsealed answer reaches the caller.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from worker.protocol.credentials import (
    V1_KID,
    TokenInfo,
    approver_kid,
    canonical,
    mac,
    same,
    token_info,
)

PROOF_FIELDS = frozenset({"proof", "approver", "child_proof"})
ROUTING_FIELDS = frozenset({"handoffs"})
"""Fields workers change on a message's way (a routing counter): not covered by proofs."""
SEAL_PREFIX = "sbx-sealed:1:"
MAX_CLOCK_SKEW_S = 300
"""How far in the future a proof's ``issued`` time may be (machines' clocks differ)."""


class CallProof(BaseModel):
    """Proof that the sender holds the session's token, for one message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kid: str = Field(min_length=1, max_length=16)
    """The token's key id (``v1`` for a v1 token)."""
    expires: int = Field(ge=0)
    """The token's expiry, unix seconds (0 for a v1 token)."""
    issued: int = Field(ge=0)
    """When the proof was made, unix seconds: a worker refuses messages older than a
    call id stays claimed, so a captured message cannot be replayed after that."""
    mac: str = Field(min_length=1, max_length=64)


class ApproverProof(BaseModel):
    """Proof that the sender holds the approver credential, for one approval message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kid: str = Field(min_length=1, max_length=16)
    mac: str = Field(min_length=1, max_length=64)


def message_body(kind: str, message: BaseModel) -> bytes:
    """The bytes a proof covers: ``kind`` and every field of ``message`` but the proofs
    and :data:`ROUTING_FIELDS`."""
    exclude = set(PROOF_FIELDS | ROUTING_FIELDS)
    return canonical([kind, message.model_dump(mode="json", exclude=exclude)])


def prove(token: str, body: bytes, *, issued: int | None = None) -> CallProof:
    """A proof over ``body`` by the holder of session token ``token``.

    A string that is no well-formed token still gives a proof (named as a v1
    token), which no worker accepts: the caller then hears ``denied``.
    """
    info = token_info(token) or TokenInfo(V1_KID, 0)
    issued = int(time.time()) if issued is None else issued
    tag = mac(token.encode(), "sbx-call:v1", info.kid, info.expires, issued, body)
    return CallProof(kid=info.kid, expires=info.expires, issued=issued, mac=tag)


def proof_matches(token: str, proof: CallProof, body: bytes) -> bool:
    """True when ``proof`` over ``body`` was made with ``token``."""
    tag = mac(token.encode(), "sbx-call:v1", proof.kid, proof.expires, proof.issued, body)
    return same(tag, proof.mac)


def approver_proof(approver_token: str, body: bytes) -> ApproverProof:
    """A proof over ``body`` by the holder of the approver credential ``approver_token``
    (a malformed one gives a proof no worker accepts)."""
    kid = approver_kid(approver_token) or "unknown"
    return ApproverProof(kid=kid, mac=mac(approver_token.encode(), "sbx-approve:v1", body))


def approver_matches(approver_token: str, proof: ApproverProof, body: bytes) -> bool:
    """True when ``proof`` over ``body`` was made with ``approver_token``."""
    return same(mac(approver_token.encode(), "sbx-approve:v1", body), proof.mac)


def seal_result(token: str, call_id: str, result: str) -> str:
    """``result`` sealed for the holder of ``token`` as the answer of ``call_id``."""
    tag = mac(token.encode(), "sbx-result:v1", call_id, result)
    return f"{SEAL_PREFIX}{tag}:{result}"


def open_result(token: str, call_id: str, value: str) -> str | None:
    """The result inside ``value`` if a worker sealed it for ``token`` and ``call_id``."""
    if not value.startswith(SEAL_PREFIX):
        return None
    tag, sep, result = value[len(SEAL_PREFIX) :].partition(":")
    if not sep or not same(mac(token.encode(), "sbx-result:v1", call_id, result), tag):
        return None
    return result


_HINTS = {
    "lost": "the worker running this call died before it finished; the command may have "
    "run partly. Check the session's state before retrying.",
    "denied": "session token missing or invalid for this session",
    "collected": "the result of this call was already collected; a result is handed out once",
    "cancelled": "cancelled by the caller before it started; nothing ran",
    "invalid": "the worker could not read the call message (client and worker versions "
    "may differ)",
}


def hint_result(call_id: str, value: str) -> str | None:
    """The client's own text for an unsealed answer whose status can be taken on its word
    (``lost``, ``denied``, ...: they tell the caller nothing ran or nothing came back);
    None for anything else, which is then a forged result."""
    try:
        data = json.loads(value)
    except ValueError:
        return None
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, str) or status not in _HINTS:
        return None
    return json.dumps({"error": _HINTS[status], "status": status, "call_id": call_id})


def answer_opener(token: str, call_id: str) -> Callable[[str], str | None]:
    """Opens the answers of ``call_id``: sealed for ``token`` (the result), or a hint
    (the client's own text); None: forged."""

    def open_(value: str) -> str | None:
        return open_result(token, call_id, value) or hint_result(call_id, value)

    return open_
