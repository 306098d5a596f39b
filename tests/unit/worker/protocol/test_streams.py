"""A call's stream and staged uploads in the ledger, on a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from worker.broker.connection import redis_client
from worker.protocol.ledger import CallLedger
from worker.protocol.streams import (
    LIVE_MAX_PIECES,
    STREAM_TTL_S,
    CallStreams,
    Piece,
    stream_key,
    upload_key,
)


@pytest.fixture
def client(external_redis_url: str) -> Iterator[redis.Redis]:
    c = redis_client(external_redis_url)
    c.flushdb()
    yield c
    c.close()


def test_pieces_come_before_the_result_in_order(client: redis.Redis) -> None:
    ledger, streams = CallLedger(client, claim_ttl=600, lost_after=5.0), CallStreams(client)
    streams.push_live("c1", "one\n")
    streams.push_bytes("c1", b"\x00two")
    ledger.deliver("c1", '{"output": "one\\ntwo"}')
    got = [ledger.take_streamed("c1", 5.0) for _ in range(3)]
    assert got == [Piece(b"one\n"), Piece(b"\x00two"), '{"output": "one\\ntwo"}']
    assert ledger.take_streamed("c1", 0.01) is None


def test_live_output_is_bounded_and_says_what_a_slow_reader_missed(client: redis.Redis) -> None:
    streams = CallStreams(client)
    for n in range(LIVE_MAX_PIECES):
        assert streams.push_live("c2", f"{n}\n") is True
    assert streams.push_live("c2", "dropped\n") is False
    assert streams.push_live("c2", "also dropped\n") is False
    assert client.llen(stream_key("c2")) == LIVE_MAX_PIECES
    assert 0 < client.ttl(stream_key("c2")) <= STREAM_TTL_S
    client.lpop(stream_key("c2"))  # the reader catches up by one
    assert streams.push_live("c2", "kept\n") is True
    raw: list[bytes] = client.lrange(stream_key("c2"), -2, -1)  # type: ignore[assignment]
    tail = [v.decode() for v in raw]
    assert tail[0] == ("\n[sbx: 21 bytes of live output skipped: the reader fell behind; "
                       "the result has the output]\n")  # fmt: skip
    assert tail[1] == "kept\n"


def test_a_staged_upload_is_taken_once_and_capped(client: redis.Redis) -> None:
    streams = CallStreams(client)
    streams.stage("u1", [b"ab", b"cd", b""], ttl=60)
    assert 0 < client.ttl(upload_key("u1")) <= 60
    assert streams.take_staged("u1", 4) == b"abcd"
    assert streams.take_staged("u1", 4) == b""  # taken: nothing left
    streams.stage("u2", [b"abc", b"def"], ttl=60)
    assert streams.take_staged("u2", 5) is None  # over the cap: refused and dropped
    assert client.exists(upload_key("u2")) == 0
