"""kombu's Redis transport, except that a malformed message is dropped, not fatal.

kombu's Redis channel pops a message (BRPOP) and decodes its envelope -- JSON,
then the base64 body -- inside the worker's event loop. A message that fails to
decode (``LPUSH sbx garbage``, a truncated envelope, a body that is not base64)
raised out of the event loop, and Celery stopped the worker ("Unrecoverable
error"). One stray message on the shared queue stopped every worker that took
one.

Here such a message is dropped: it is already off the queue (early acks; BRPOP
removed it), it names no call a client could be waiting for that its envelope
still tells, and it is logged once by queue and kind of fault -- never its
content, which may hold a command, its arguments or a session's secrets.

Errors raised while a well-formed message is handed to Celery are not touched:
those are Celery's to handle (it logs and discards a body it cannot decode or a
task it does not know).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import kombu.transport as kombu_transport
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

log = logging.getLogger(__name__)

TRANSPORT = "worker.broker.redis_transport:Transport"
"""What ``broker_transport`` names for a Redis broker (``worker.broker.app``)."""
ALIAS = "sbx-redis"
"""kombu's name of this transport, for URLs that name their transport
(``sbx-redis+socket://``: a ``redis+socket://`` URL would name kombu's own)."""


class MalformedMessage(Exception):
    """A message whose envelope does not decode; says what failed, never the content."""


_reading = threading.local()
"""Per event-loop thread: whether the message just popped reached delivery (decoded JSON)."""


class Message(virtual.Message):
    """kombu's message, raising :class:`MalformedMessage` when its envelope is bad."""

    def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
        try:
            super().__init__(payload, channel=channel, **kwargs)  # type: ignore[no-untyped-call]
        except Exception as exc:  # a payload not a dict, no properties, body not base64...
            raise MalformedMessage(f"bad envelope ({type(exc).__name__})") from None


class Channel(kombu_redis.Channel):
    """The Redis channel whose message read drops what does not decode."""

    Message = Message

    def _brpop_read(self, **options: Any) -> bool:
        _reading.delivering = False
        try:
            result: bool = super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        except MalformedMessage as exc:
            _dropped(str(exc))
            return True
        except ValueError as exc:
            # Raised before delivery: the popped item is not UTF-8 JSON (kombu's loads).
            # Raised after: Celery's, left alone.
            if getattr(_reading, "delivering", True):
                raise
            _dropped(f"not JSON ({type(exc).__name__})")
            return True
        return result


class Transport(kombu_redis.Transport):
    """The Redis transport with :class:`Channel`."""

    Channel = Channel

    def _deliver(self, message: Any, queue: Any) -> None:
        _reading.delivering = True  # the envelope decoded as JSON
        super()._deliver(message, queue)  # type: ignore[no-untyped-call]


def _dropped(fault: str) -> None:
    log.error("dropped a malformed message from the broker: %s; it is not a sbx call", fault)


# A name kombu resolves to this transport (a new name: kombu's own are untouched).
kombu_transport.TRANSPORT_ALIASES.setdefault(ALIAS, TRANSPORT)
