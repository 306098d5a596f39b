"""Moving the tool calls waiting on an AMQP queue to another queue (RabbitMQ).

The AMQP side of ``worker.service.stranded_calls``: a worker that died leaves its own
queue behind (durable, expiring an hour after its last consumer), with the calls
clients sent there. :class:`ToolCallDrainer` takes each message off that queue; a
tool call is published again, unchanged, to the shared queue and only then
acknowledged, so a connection lost in between leaves it on both queues (the call's
claim key runs it once) and never on neither. Other messages (pings, receipt requests,
which only that worker's home can answer) are left unacknowledged and go back to the
queue, in their order, when the channel closes.
"""

from __future__ import annotations

import contextlib
from typing import Any

from amqp.exceptions import NotFound
from kombu.connection import Connection


class ToolCallDrainer:
    """Moves Celery task ``task``'s messages between the queues of the AMQP broker at
    ``broker_url``, on one connection of its own (opened on first use, and again after
    it failed)."""

    def __init__(self, broker_url: str, task: str) -> None:
        self.task = task
        self._connection: Any = Connection(broker_url)  # type: ignore[no-untyped-call]

    def drain(self, queue: str, onward: str) -> tuple[int, int] | None:
        """Move the task's messages waiting on ``queue`` to ``onward`` (both queue names,
        routed through the default exchange); ``(moved, left)``, or None when ``queue``
        does not exist (any more). Raises :class:`ConnectionError` when the broker
        cannot be reached or drops the connection."""
        failures = (*self._connection.connection_errors, *self._connection.channel_errors)
        try:
            return _drain(self._connection.channel(), queue, onward, self.task)
        except failures as exc:
            self._connection.close()  # the next drain connects afresh
            raise ConnectionError(f"AMQP broker: {exc!r}") from exc


def _drain(channel: Any, queue: str, onward: str, task: str) -> tuple[int, int] | None:
    moved = left = 0
    try:
        while (message := channel.basic_get(queue, no_ack=False)) is not None:
            headers = message.properties.get("application_headers") or {}
            if headers.get("task") != task:
                left += 1  # back to the queue when the channel closes
                continue
            channel.basic_publish(message, exchange="", routing_key=onward)
            channel.basic_ack(message.delivery_tag)
            moved += 1
    except NotFound:
        return None  # the broker closed the channel; the connection stays usable
    finally:
        with contextlib.suppress(Exception):
            channel.close()
    return moved, left
