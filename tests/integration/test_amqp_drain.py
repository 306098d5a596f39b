"""Moving the tool calls off an AMQP queue (a dead worker's own queue) on a real RabbitMQ:
tool calls go to the other queue unchanged, anything else stays where it was."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Queue

from tests.helpers import free_port
from tests.rabbitmq import RabbitMQProcess
from worker.broker.amqp_drain import ToolCallDrainer
from worker.broker.app import worker_queue
from worker.protocol.tasks import TOOL_CALL_TASK


def _messages(connection: Any, queue: str) -> list[tuple[str, bytes]]:
    """The task header and body of each message on ``queue``, taken off it."""
    taken = []
    channel = connection.channel()
    while (message := channel.basic_get(queue, no_ack=True)) is not None:
        taken.append((message.properties["application_headers"]["task"], message.body))
    channel.close()
    return taken


def test_tool_calls_move_unchanged_and_other_messages_stay(rabbitmq: RabbitMQProcess) -> None:
    own, onward = f"sbx.w.test.{uuid.uuid4().hex[:8]}", f"sbx-onward-{uuid.uuid4().hex[:8]}"
    with Connection(rabbitmq.url) as connection:  # type: ignore[no-untyped-call]
        channel = connection.default_channel
        worker_queue(own)(channel).declare()  # type: ignore[no-untyped-call]
        Queue(onward, durable=False, auto_delete=False)(channel).declare()  # type: ignore[no-untyped-call]
        producer = connection.Producer()
        for task, body in [(TOOL_CALL_TASK, b"call-1"), ("sbx.ping", b"ping"),
                           (TOOL_CALL_TASK, b"call-2")]:  # fmt: skip
            producer.publish(body, routing_key=own, exchange="", headers={"task": task},
                             content_type="application/octet-stream",
                             content_encoding="binary")  # fmt: skip
        drainer = ToolCallDrainer(rabbitmq.url, TOOL_CALL_TASK)
        assert drainer.drain(own, onward) == (2, 1)
        assert drainer.drain(f"sbx.w.gone.{uuid.uuid4().hex[:8]}", onward) is None
        assert drainer.drain(own, onward) == (0, 1)  # the connection outlived the refusal
        raw = connection.connection
        assert _messages(raw, onward) == [(TOOL_CALL_TASK, b"call-1"), (TOOL_CALL_TASK, b"call-2")]
        assert _messages(raw, own) == [("sbx.ping", b"ping")]
        channel.queue_delete(own)
        channel.queue_delete(onward)


def test_a_broker_that_cannot_be_reached_is_a_connection_error() -> None:
    drainer = ToolCallDrainer(f"amqp://guest:guest@127.0.0.1:{free_port()}//", TOOL_CALL_TASK)
    with pytest.raises(ConnectionError, match="AMQP broker"):
        drainer.drain("sbx.w.any", "sbx")
