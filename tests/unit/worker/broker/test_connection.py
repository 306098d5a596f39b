"""Broker and ledger URLs as shown in messages and logs: never with a password."""

from __future__ import annotations

import pytest

from worker.broker.connection import display_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("redis://:s3cret@h/0", "redis://:***@h/0"),
        ("rediss://u:s3cret@h/0?password=s3cret&db=1", "rediss://u:***@h/0?password=***&db=1"),
        ("amqp://guest:s3cret@127.0.0.1:5672//", "amqp://guest:***@127.0.0.1:5672//"),
        ("redis+socket:///tmp/x.sock", "redis+socket:///tmp/x.sock"),
    ],
)
def test_display_url_hides_passwords(url: str, shown: str) -> None:
    assert display_url(url) == shown
    assert "s3cret" not in display_url(url)
