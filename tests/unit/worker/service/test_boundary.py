"""One boundary: every task answers a bad caller with the same status, and errors keep
their own status and exit code on the wire and in the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from environments.errors import Denied, Invalid, NotFound, SbxError, UnknownBackend
from process_registry.models import PermissionDenied
from process_registry.sessions import SessionSigner
from worker.errors import (
    EXIT_DENIED,
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    TokenRequired,
    exit_code_for,
)
from worker.protocol.mac import message_body, prove
from worker.protocol.messages import ApprovalMessage, ToolCallMessage
from worker.protocol.process_messages import ReceiptOpMessage
from worker.service.approvals import execute_approval
from worker.service.boundary import error_fields
from worker.service.calls import execute_call
from worker.service.receipt_ops import execute_receipt_op
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings


@pytest.fixture
def runtime(tmp_path: Path) -> WorkerRuntime:
    # The caller is refused before the ledger or the pool is touched.
    return WorkerRuntime(
        settings=Settings(home=tmp_path),
        broker_url="redis://unused",
        signer=SessionSigner(b"k" * 32),
        ledger=cast(Any, None),
        pool=cast(Any, None),
    )


def _signed(kind: str, message: Any, token: str) -> dict[str, Any]:
    """``message`` with a proof made with ``token``, as it travels."""
    proof = prove(token, message_body(kind, message))
    dumped: dict[str, Any] = message.model_copy(update={"proof": proof}).model_dump(mode="json")
    return dumped


@pytest.mark.parametrize(
    "token",
    ["", "sbx1.forged", SessionSigner(b"x" * 32).token("s1")],
    ids=["empty", "v1-forged", "another-key"],
)
def test_a_bad_token_is_denied_by_every_task(runtime: WorkerRuntime, token: str) -> None:
    call_message = ToolCallMessage(call_id="c1", session_id="s1", tool="terminal",
                                   args={"command": "true"})  # fmt: skip
    call = json.loads(execute_call(_signed("call", call_message, token), runtime))
    op = ReceiptOpMessage(session_id="s1", op="receipts_list")
    receipts = json.loads(execute_receipt_op(_signed("receipt-op", op, token), runtime))
    answer = ApprovalMessage(session_id="s1", approval_id="a1", action="approve")
    approval = json.loads(execute_approval(_signed("approval", answer, token), runtime))
    assert call["status"] == receipts["status"] == approval["status"] == "denied"
    assert call["error"] == receipts["error"] == approval["error"]


def test_errors_carry_their_status_and_the_cli_maps_it() -> None:
    cases: list[tuple[SbxError, str, int]] = [
        (Denied("no"), "denied", EXIT_DENIED),
        (NotFound("no"), "not_found", EXIT_NOT_FOUND),
        (Invalid("no"), "invalid", EXIT_USAGE),
        (UnknownBackend("no"), "invalid", EXIT_USAGE),
        (TokenRequired("no"), "denied", EXIT_DENIED),
        (SbxError("no"), "error", EXIT_FAILURE),
    ]
    for exc, status, code in cases:
        assert error_fields(exc)["status"] == status
        assert exit_code_for(exc.status) == code == exc.exit_code


def test_a_denial_says_nothing_about_what_it_protects() -> None:
    fields = error_fields(PermissionDenied("process p1 runs `cat /secret` for bob"))
    assert fields["status"] == "denied"
    assert "bob" not in fields["error"] and "secret" not in fields["error"]


def test_builtins_still_catch_sbx_errors() -> None:
    with pytest.raises(PermissionError):
        raise TokenRequired("no token")
    with pytest.raises(LookupError):
        raise NotFound("gone")
