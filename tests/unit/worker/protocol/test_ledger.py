"""Call results through the ledger's mailbox, on a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.helpers import RedisProcess
from worker.broker.connection import redis_client
from worker.protocol.ledger import (
    CANCELLED,
    CallLedger,
    declare_lost,
    heartbeat_key,
    lost_result,
    result_key,
)


@pytest.fixture
def ledger(external_redis_url: str) -> Iterator[CallLedger]:
    client = redis_client(external_redis_url)
    client.flushdb()
    yield CallLedger(client, claim_ttl=600, lost_after=5.0)
    client.close()


def test_a_result_is_delivered_once_and_read_once(ledger: CallLedger) -> None:
    assert ledger.deliver("c1", '{"output": "hi\\n"}') is True
    assert ledger.take_result("c1", 5.0) == '{"output": "hi\\n"}'
    # Taken: the mailbox is empty, and nothing else may be delivered for this call.
    assert ledger.take_result("c1", 0.01) is None
    assert ledger.deliver("c1", '{"output": "again"}') is False
    assert ledger.take_result("c1", 0.01) is None


def test_the_first_result_wins_over_a_late_lost(ledger: CallLedger) -> None:
    ledger.deliver("c2", '{"output": "real"}')
    assert declare_lost(ledger, "c2", "w1") is False
    assert ledger.take_result("c2", 5.0) == '{"output": "real"}'


def test_a_lost_result_wins_over_a_late_real_one(ledger: CallLedger) -> None:
    assert declare_lost(ledger, "c3", "w1") is True
    assert ledger.deliver("c3", '{"output": "late"}') is False
    assert ledger.take_result("c3", 5.0) == lost_result("c3", "w1")


def test_mailbox_expires_with_the_claim(ledger: CallLedger) -> None:
    ledger.deliver("c4", "{}")
    ttl = ledger.client.ttl(result_key("c4"))
    assert isinstance(ttl, int) and 0 < ttl <= 600


def test_a_finished_call_is_never_lost(ledger: CallLedger) -> None:
    assert ledger.claim("c5", "w1") == 1
    # The worker died right after delivering: no heartbeat, but a result.
    ledger.deliver("c5", "{}")
    ledger.client.delete("sbx:call:c5:hb")
    assert ledger.is_lost("c5") is False
    assert ledger.claim("c6", "w1") == 1
    ledger.client.delete("sbx:call:c6:hb")
    assert ledger.is_lost("c6") is True


def test_waiting_on_a_dead_broker_raises() -> None:
    dead = CallLedger(
        redis.Redis(unix_socket_path="/nonexistent/sbx.sock"), claim_ttl=600, lost_after=5.0
    )
    with pytest.raises(redis.ConnectionError):
        dead.take_result("c7", 0.1)


def test_collected_tells_a_taken_result_from_one_not_yet_delivered(ledger: CallLedger) -> None:
    assert ledger.collected("c8") is False
    ledger.deliver("c8", "{}")
    assert ledger.collected("c8") is False  # delivered, still in its mailbox
    assert ledger.take_result("c8", 5.0) == "{}"
    assert ledger.collected("c8") is True


def test_a_call_cancelled_in_the_queue_is_alive_until_its_result_is_in(
    ledger: CallLedger,
) -> None:
    ledger.request_cancel("c9")
    assert ledger.claim("c9", "w1") == CANCELLED
    assert ledger.client.exists(heartbeat_key("c9")) == 1
    assert ledger.is_lost("c9") is False


def test_no_call_is_declared_lost_right_after_an_outage() -> None:
    server = RedisProcess()
    server.start()
    try:
        ledger = CallLedger(redis_client(server.url), claim_ttl=600, lost_after=600.0)
        server.kill()
        with pytest.raises(redis.ConnectionError):
            ledger.take_result("c10", 0.1)
        server.start()
        # Heartbeats expired while it was away (here: a restart wiped them).
        ledger.claim("c10", "w1")
        ledger.client.delete(heartbeat_key("c10"))
        assert ledger.is_lost("c10") is False  # its worker gets time to beat again
        fresh = CallLedger(redis_client(server.url), claim_ttl=600, lost_after=600.0)
        assert fresh.is_lost("c10") is True  # a ledger that saw no outage
        ledger.client.close()
        fresh.client.close()
    finally:
        server.stop()


def test_a_call_handed_to_a_worker_that_never_takes_it_is_lost_and_never_runs(
    ledger: CallLedger,
) -> None:
    from worker.protocol.ledger import CLAIMED, DUPLICATE

    assert ledger.claim("h1", "w1") == CLAIMED
    assert ledger.hand_off("h1", "w2", "w3") is False  # only the claimant hands it on
    assert ledger.hand_off("h1", "w1", "w2") is True
    assert ledger.claim("h1", "w3") == DUPLICATE  # handed to w2: nobody else takes it
    assert ledger.is_lost("h1") is False  # w2 has until its heartbeat lapses
    ledger.client.delete(heartbeat_key("h1"))  # ... which it did: w2 died first
    assert ledger.is_lost("h1") is True
    assert declare_lost(ledger, "h1", None) is True
    assert ledger.take_result("h1", 1.0) == lost_result("h1", None)
    # A late w2 (it was only slow) finds the call answered and never runs it.
    assert ledger.claim("h1", "w2") == DUPLICATE


def test_a_handed_call_is_claimed_by_its_new_worker(ledger: CallLedger) -> None:
    from worker.protocol.ledger import CLAIMED

    assert ledger.claim("h2", "w1") == CLAIMED
    assert ledger.hand_off("h2", "w1", "w2") is True
    assert ledger.claim("h2", "w2") == CLAIMED
    assert ledger.running_calls()["h2"] == "w2"


def test_a_collected_result_is_kept_for_a_retry(ledger: CallLedger) -> None:
    ledger.deliver("k1", '{"output": "once"}')
    assert ledger.take_result("k1", 1.0) == '{"output": "once"}'
    assert ledger.collected("k1") is True
    assert ledger.answer("k1") == '{"output": "once"}'
