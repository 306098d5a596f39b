"""The heartbeat's presence renewal while the ledger refuses connections."""

from __future__ import annotations

import logging

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.helpers import free_port
from worker.protocol.ledger import CallLedger
from worker.service.heartbeat import Heartbeat


def test_an_unreachable_ledger_is_logged_once_when_it_goes_and_once_when_it_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = redis.Redis(
        host="127.0.0.1", port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    reachable = False

    def renew() -> None:
        if not reachable:
            refused.ping()  # a real connection refused by the loopback port

    ledger = CallLedger(refused, claim_ttl=60, lost_after=10)
    beat = Heartbeat(ledger, "w1", interval=5.0, on_tick=renew)
    with caplog.at_level(logging.WARNING, logger="worker.service.heartbeat"):
        for _ in range(4):
            beat.tick()
        reachable = True
        beat.tick()
        beat.tick()
    lines = [r for r in caplog.records if r.name == "worker.service.heartbeat"]
    assert [r.getMessage().split(" (")[0].split(",")[0] for r in lines] == [
        "could not renew this worker's presence",
        "this worker's presence is renewed again",
    ]
    assert all(r.exc_info is None for r in lines)  # one line each, no traceback
    assert "retrying every 5s" in lines[0].getMessage()
    assert "after 4 failed attempt(s)" in lines[1].getMessage()
