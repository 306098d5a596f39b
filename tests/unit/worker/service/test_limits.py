"""Operator limits are checked before anything parses a call: a clear ``invalid`` answer,
nothing run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from process_registry.sessions import SessionSigner
from worker.service.calls import execute_call
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings

SIGNER = SessionSigner(b"k" * 32)


@pytest.fixture
def runtime(tmp_path: Path) -> WorkerRuntime:
    # A refused call never reaches the pool or the ledger.
    return WorkerRuntime(
        settings=Settings(home=tmp_path, max_timeout=600, max_command_bytes=4096),
        broker_url="redis://unused",
        signer=SIGNER,
        ledger=cast(Any, None),
        pool=cast(Any, None),
    )


def call(runtime: WorkerRuntime, args: Any) -> dict[str, Any]:
    message = {
        "call_id": "c1",
        "session_id": "s1",
        "session_token": SIGNER.token("s1"),
        "tool": "terminal",
        "args": args,
    }
    answer: dict[str, Any] = json.loads(execute_call(message, runtime))
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
