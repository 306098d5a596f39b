"""A client's credentials: it proves each message and opens each answer, never sending a token.

:class:`ClientAuth` holds the session token (given, from ``SBX_SESSION_TOKEN``,
or minted from the local keyring when this machine holds one) and, for
approvals, the approver credential. :meth:`ClientAuth.sign` adds a
:class:`~worker.protocol.mac.CallProof` to a message and returns the opener of
its answer: a sealed answer opens, an unsealed one counts only as a hint
(``lost``, ``denied``, ...; the client's own text is returned), anything else
is dropped as forged (``worker.broker.sender``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import redis
from pydantic import BaseModel

from worker.protocol.credentials import token_info
from worker.protocol.errors import BrokerUnavailable, TokenRequired
from worker.protocol.mac import (
    ApproverProof,
    CallProof,
    answer_opener,
    approver_proof,
    message_body,
    prove,
)
from worker.protocol.revocations import read_epoch

if TYPE_CHECKING:
    from worker.settings import Settings

M = TypeVar("M", bound=BaseModel)
Opener = Callable[[str], "str | None"]

RENEW_BEFORE_S = 300.0
"""A token this client minted is minted again this long before it expires."""


class ClientAuth:
    """Credentials of one client session (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        token: str | None,
        *,
        mint: Callable[[], str] | None = None,
        approver: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``token`` as given (None: ``mint`` makes one, and again before it expires)."""
        if token is None and mint is None:
            raise TokenRequired("no session token and no way to mint one")
        self.session_id = session_id
        self._token = token
        self._mint = mint
        self._approver = approver

    @property
    def token(self) -> str:
        """The session token (minted anew when this client minted it and it is expiring)."""
        if self._mint is not None:
            info = token_info(self._token)
            if info is None or (not info.v1 and info.expires - RENEW_BEFORE_S < time.time()):
                self._token = self._mint()
        assert self._token is not None
        return self._token

    def prove(self, kind: str, message: BaseModel) -> tuple[CallProof, Opener]:
        """A proof over ``message`` (of ``kind``) and the opener of its answer."""
        token = self.token
        call_id = str(getattr(message, "call_id", ""))
        return prove(token, message_body(kind, message)), answer_opener(token, call_id)

    def sign(self, kind: str, message: M) -> tuple[M, Opener]:
        """``message`` with its ``proof``, and the opener of its answer."""
        proof, open_ = self.prove(kind, message)
        return message.model_copy(update={"proof": proof}), open_

    def approver_proof(self, kind: str, message: BaseModel) -> ApproverProof | None:
        """The approver credential's proof over ``message`` (None: no credential here)."""
        credential = self._approver()
        if credential is None:
            return None
        return approver_proof(credential, message_body(kind, message))


def client_auth(
    settings: Settings,
    session_id: str,
    token: str | None,
    ledger: redis.Redis,
    *,
    approver: str | None = None,
) -> ClientAuth:
    """The credentials of ``session_id``: ``token``, else ``SBX_SESSION_TOKEN`` (for that
    session), else minted from the local keyring (created in embedded mode, where this
    home is the deployment's). Raises :class:`~worker.errors.TokenRequired`."""
    # Key handling loads only for a client that may mint (importing the client loads none).
    from worker.identity import can_mint, keyring_store, load_signer, local_approver_token

    given = token
    if given is None and settings.session_token is not None and settings.session_id == session_id:
        given = settings.session_token.get_secret_value()

    def approver_credential() -> str | None:
        return approver or local_approver_token(settings)

    if given is not None:
        return ClientAuth(session_id, given, approver=approver_credential)
    embedded = settings.broker_url is None
    if not (can_mint(settings) or embedded):
        raise TokenRequired(
            "no session token: set SBX_SESSION_TOKEN (from `sbx session token SESSION_ID` "
            "on a machine holding the secret key)"
        )
    if embedded:
        keyring_store(settings).current(create=True)
    signer = load_signer(settings)

    def mint() -> str:
        try:
            epoch = read_epoch(ledger, session_id, settings.home)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise BrokerUnavailable(
                f"cannot reach the ledger to mint a token: {exc}; the call was not sent"
            ) from None
        return signer.token(session_id, epoch=epoch)

    return ClientAuth(session_id, None, mint=mint, approver=approver_credential)
