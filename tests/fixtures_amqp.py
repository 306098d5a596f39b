"""A real RabbitMQ for the test session (loopback only), and a clean broker per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rabbitmq import RabbitMQProcess, rabbitmq_server


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQProcess]:
    """One RabbitMQ node for the session (its boot takes seconds), stopped at the end.

    Skips locally without ``rabbitmq-server``; fails in CI (``require``).
    """
    with rabbitmq_server() as server:
        yield server


@pytest.fixture
def amqp_url(rabbitmq: RabbitMQProcess) -> str:
    """The node's AMQP URL, its shared ``sbx`` queue emptied (tests share the node)."""
    rabbitmq.purge("sbx")
    return rabbitmq.url
