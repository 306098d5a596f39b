"""Live output: decoded, redacted and pushed in order, whatever the reads' boundaries."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import redis

from process_registry.redact import redact_text
from worker.broker.connection import redis_client
from worker.protocol.streams import CallStreams, stream_key
from worker.service.live import LiveOutput

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OUTPUT = (
    "building...\n"
    f"export GITHUB_TOKEN={TOKEN}\n"
    "naïve café ✓ — done\n"
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDc3yZk7j0v1XbY8x3k2JpW0f2Q9mJ7cX0aV3bT6n5bZAAAAJgAAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
    "password: hunter2-hunter2\n"
    "bye"
)


@pytest.fixture
def streams(external_redis_url: str) -> Iterator[CallStreams]:
    client = redis_client(external_redis_url)
    client.flushdb()
    yield CallStreams(client)
    client.close()


def _pushed(streams: CallStreams, call_id: str) -> list[str]:
    raw: list[bytes] = streams.client.lrange(stream_key(call_id), 0, -1)  # type: ignore[assignment]
    return [v.decode() for v in raw]


@pytest.mark.parametrize("seed", range(8))
def test_pieces_join_to_the_redacted_output_wherever_reads_are_cut(
    streams: CallStreams, seed: int
) -> None:
    data = OUTPUT.encode()
    rng = random.Random(seed)
    live = LiveOutput(streams, f"call{seed}")
    start = 0
    while start < len(data):  # cuts fall anywhere, inside characters and secrets too
        end = min(len(data), start + rng.randint(1, 40))
        live.feed(data[start:end])
        start = end
    live.close()
    pieces = _pushed(streams, f"call{seed}")
    assert "".join(pieces) == redact_text(OUTPUT)
    for secret in ("a1B2c3D4", "hunter2", "b3BlbnNzaC1rZXkt"):
        assert not any(secret in p for p in pieces)


def test_unredacted_when_the_result_is_not_and_nothing_pushed_for_no_output(
    streams: CallStreams,
) -> None:
    live = LiveOutput(streams, "plain", redact=False)
    live.feed(b"password: hunter2-hunter2\n")
    live.close()
    assert _pushed(streams, "plain") == ["password: hunter2-hunter2\n"]
    quiet = LiveOutput(streams, "quiet")
    quiet.close()
    assert _pushed(streams, "quiet") == []


def test_a_ledger_that_fails_stops_live_output_not_the_caller() -> None:
    broken = CallStreams(redis.Redis(unix_socket_path="/nonexistent/redis.sock"))
    live = LiveOutput(broken, "gone")
    live.feed(b"line\n")
    live.close()  # returns: the failure is logged, the call goes on
