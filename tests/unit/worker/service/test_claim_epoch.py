"""A tool call's claim reads its session's revocation epoch in the same round trip, and
the caller's proof is checked against it: a revoked session's old token is refused, also
by a ledger that lost everything (its epochs come back from the home's mirror)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from process_registry.sessions import SessionSigner
from worker.protocol.ledger import CLAIMED, DUPLICATE, CallLedger
from worker.protocol.mac import message_body, prove
from worker.protocol.messages import ToolCallMessage
from worker.protocol.revocations import read_epoch, revoke
from worker.service.runtime import WorkerRuntime
from worker.service.tasks import run_claimed
from worker.settings import Settings

SIGNER = SessionSigner(b"k" * 32)


@pytest.fixture
def runtime(tmp_path: Path, external_redis_url: str) -> Iterator[WorkerRuntime]:
    # A refused call never reaches the pool.
    client = redis.Redis.from_url(external_redis_url)
    client.flushdb()
    svc = WorkerRuntime(
        settings=Settings(home=tmp_path),
        broker_url="redis://unused",
        signer=SIGNER,
        ledger=CallLedger(client, claim_ttl=60, lost_after=10.0),
        pool=cast(Any, None),
    )
    yield svc
    svc.heartbeat.stop()
    svc.heartbeat.join(timeout=5)
    client.close()


def signed(session_id: str, token: str) -> tuple[str, dict[str, Any]]:
    call_id = uuid.uuid4().hex
    message = ToolCallMessage(
        call_id=call_id, session_id=session_id, tool="terminal", args={"command": "true"}
    )
    proof = prove(token, message_body("call", message))
    return call_id, message.model_copy(update={"proof": proof}).model_dump(mode="json")


def test_the_claim_reads_the_epoch_once_the_ledger_is_seeded(
    runtime: WorkerRuntime, tmp_path: Path
) -> None:
    ledger = runtime.ledger
    # Not seeded (new, or emptied by a restart): the epoch must be read the long way.
    assert ledger.claim_reading_epoch("e1", "w1", "alice") == (CLAIMED, None)
    assert read_epoch(ledger.client, "alice", tmp_path) == 0  # which seeds the ledger
    assert ledger.claim_reading_epoch("e2", "w1", "alice") == (CLAIMED, 0)
    epoch = revoke(ledger.client, "alice", tmp_path)
    assert ledger.claim_reading_epoch("e3", "w1", "alice") == (CLAIMED, epoch)
    assert ledger.claim_reading_epoch("e3", "w2", "alice") == (DUPLICATE, epoch)


@pytest.mark.parametrize("ledger_lost_everything", [False, True])
def test_a_revoked_token_is_refused_at_its_claim(
    runtime: WorkerRuntime, tmp_path: Path, ledger_lost_everything: bool
) -> None:
    client = runtime.ledger.client
    old = SIGNER.token("alice", epoch=read_epoch(client, "alice", tmp_path))
    revoke(client, "alice", tmp_path)
    if ledger_lost_everything:
        client.flushdb()
    answer = run_claimed(*signed("alice", old), runtime)
    assert answer is not None and json.loads(answer)["status"] == "denied"
