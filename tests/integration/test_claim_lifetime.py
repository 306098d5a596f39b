"""A call's claim outlives every proof that could make it; a clock too far ahead is named
in the worker's log.

A real redis-server and a real ``sbx worker``; the client's clock is moved ahead
by replacing the clock its proofs are made with.
"""

from __future__ import annotations

import json
import time
import types
from pathlib import Path
from typing import Any

import pytest
import redis

import worker.protocol.mac as mac
from tests.fixtures_workers import settings_for
from tests.helpers import RedisProcess
from worker.client import SandboxClient
from worker.protocol.ledger import claim_key, delivered_key

CLAIM_TTL = 60


def _clock_ahead(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Proofs made from now on are issued ``seconds`` ahead of the real clock."""
    real = time.time
    monkeypatch.setattr(mac, "time", types.SimpleNamespace(time=lambda: real() + seconds))


def test_the_claim_of_a_call_signed_ahead_lives_as_long_as_its_proof_verifies(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    start_worker(own_redis.url, SBX_CLAIM_TTL=str(CLAIM_TTL))
    settings = settings_for(sbx_home, own_redis.url, claim_ttl=CLAIM_TTL)
    ledger = redis.Redis.from_url(own_redis.url)
    with SandboxClient(session_id="skewed", settings=settings) as c:
        _clock_ahead(monkeypatch, mac.MAX_CLOCK_SKEW_S - 50)
        message = c.call_message("terminal", {"command": "echo once"}, wait=30)
        monkeypatch.undo()
        c.sender.send_call(message)
        assert json.loads(c.result(message.call_id, 30))["output"] == "once\n"
    assert message.proof is not None
    # The worker accepts a replay of this message until issued + CLAIM_TTL by its clock;
    # until then the claim must still be there, or the replay would run the call again.
    verifies_until = message.proof.issued + CLAIM_TTL
    for key in (claim_key(message.call_id), delivered_key(message.call_id)):
        ttl = ledger.ttl(key)
        assert isinstance(ttl, int) and ttl > 0, key
        assert time.time() + ttl >= verifies_until, (key, ttl)


def test_a_call_signed_too_far_ahead_is_denied_naming_the_clock(
    own_redis: RedisProcess, sbx_home: Path, start_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = start_worker(own_redis.url)
    with SandboxClient(session_id="fast", settings=settings_for(sbx_home, own_redis.url)) as c:
        _clock_ahead(monkeypatch, mac.MAX_CLOCK_SKEW_S + 100)
        message = c.call_message("terminal", {"command": "echo never"}, wait=30)
        monkeypatch.undo()
        c.sender.send_call(message)
        answer = json.loads(c.result(message.call_id, 30))
    # The caller sees its fixed "denied" text (an unsealed refusal carries no worker
    # text to it); the operator's log says why.
    assert answer["status"] == "denied", answer
    refusal = [line for line in worker.log().splitlines() if "call refused" in line]
    assert refusal and "clock" in refusal[-1], refusal
    assert f"{mac.MAX_CLOCK_SKEW_S} s allowed" in refusal[-1], refusal
