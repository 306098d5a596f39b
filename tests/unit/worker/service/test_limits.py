"""Operator limits are checked before anything parses a call: a clear ``invalid`` answer,
nothing run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from process_registry.sessions import SessionSigner
from worker.protocol.ledger import CallLedger
from worker.protocol.mac import message_body, prove
from worker.protocol.messages import ToolCallMessage
from worker.service.calls import execute_call
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings

SIGNER = SessionSigner(b"k" * 32)


@pytest.fixture
def runtime(tmp_path: Path, external_redis_url: str) -> WorkerRuntime:
    # A refused call never reaches the pool; the ledger only answers the session's
    # revocation epoch while its proof is checked.
    client = redis.Redis.from_url(external_redis_url)
    return WorkerRuntime(
        settings=Settings(home=tmp_path, max_timeout=600, max_command_bytes=4096),
        broker_url="redis://unused",
        signer=SIGNER,
        ledger=CallLedger(client, claim_ttl=60, lost_after=10.0),
        pool=cast(Any, None),
    )


def call(runtime: WorkerRuntime, args: Any) -> dict[str, Any]:
    message = ToolCallMessage(call_id="c1", session_id="s1", tool="terminal", args=args)
    proof = prove(SIGNER.token("s1"), message_body("call", message))
    signed = message.model_copy(update={"proof": proof}).model_dump(mode="json")
    answer: dict[str, Any] = json.loads(execute_call(signed, runtime))
    return answer


@pytest.mark.parametrize("timeout", [601, 10**30, 1e300])
def test_a_timeout_over_the_operators_maximum_is_refused(
    runtime: WorkerRuntime, timeout: float
) -> None:
    answer = call(runtime, {"command": "true", "timeout": timeout})
    assert answer["status"] == "invalid"
    assert "SBX_MAX_TIMEOUT" in answer["error"] and "nothing ran" in answer["error"]


def test_a_command_over_the_operators_maximum_is_refused_unread(runtime: WorkerRuntime) -> None:
    answer = call(runtime, {"command": "echo " + "x" * 5000})
    assert answer["status"] == "invalid"
    assert "SBX_MAX_COMMAND_BYTES" in answer["error"] and "5005 bytes" in answer["error"]


def test_raw_text_arguments_over_the_maximum_are_refused(runtime: WorkerRuntime) -> None:
    answer = call(runtime, '{"command": "' + "x" * (2 << 20) + '"}')
    assert answer["status"] == "invalid" and "SBX_MAX_CALL_BYTES" in answer["error"]
