"""Session leases of two workers on a real Redis ledger: a worker whose presence lapsed
(paused, cut off) must not go on trusting the leases it held before."""

from __future__ import annotations

import uuid

import redis

from tests.helpers import wait_until
from worker.protocol.leases import LeaseBook
from worker.service.leases import SessionLeases


def test_a_call_taken_in_after_a_lapse_of_presence_goes_to_the_new_holder(
    external_redis_url: str,
) -> None:
    book = LeaseBook(redis.Redis.from_url(external_redis_url), presence_ttl=0.3)
    session = f"s-{uuid.uuid4().hex[:12]}"
    paused = SessionLeases(book, f"w-paused-{session}", f"q-paused-{session}")
    other = SessionLeases(book, f"w-other-{session}", f"q-other-{session}")
    paused.announce()
    other.announce()
    assert paused.admit(session).mine
    # The first worker stops renewing its presence (a SIGSTOP); once it lapsed, the
    # other one takes the session's next call, and its lease.
    wait_until(lambda: not book.present(paused.worker_id), 30, "the presence to lapse")
    other.announce()
    taken = other.admit(session)
    assert taken.mine and taken.taken_over_from == paused.worker_id, taken
    # Resumed, the first worker takes a call in before its next heartbeat.
    late = paused.admit(session)
    assert not late.mine and late.holder == other.worker_id, late
    assert late.holder_queue == other.own_queue
    assert not paused.holds(session)
