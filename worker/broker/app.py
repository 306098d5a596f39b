"""Celery application factory with settings chosen for shell tool calls.

Why these settings (measured; docs/architecture.md, "Celery facts"):

* early ack + ``worker_disable_prefetch``: late ack with a visibility timeout
  ran commands twice; early ack with prefetch ran queued calls again after a
  worker joined. Shell commands are not idempotent, and a claim key per call
  id guards what remains (``worker.protocol.ledger``).
* threads pool: one address space, so sandboxes and connections are cached
  per session. It enforces no time limits, so sbx enforces deadlines itself.
* no result backend: every sbx task answers through its own mailbox in the
  broker's Redis (``worker.protocol.ledger``), one push and one blocking pop, where
  Celery's Redis backend spends a subscribe, a publish, a read of the stored
  meta and an unsubscribe, and gives up for good after 20 failed reconnects.
* broker transports: Redis gets ``worker_disable_prefetch`` and no kombu ack
  emulation (both Redis-only). AMQP (RabbitMQ) gets a QoS prefetch of the
  pool size (early acks: running calls hold no slot), publisher confirms (a
  call that raised no error reached the broker), and per-worker queues that
  only their worker declares (:func:`worker_queue`).
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.app.amqp import AMQP, Queues
from kombu.entity import Queue

from worker.broker import redis_transport
from worker.broker.urls import check_broker_url, is_amqp_url, is_redis_url
from worker.protocol.tasks import own_queue_prefix
from worker.settings import Settings, SettingsError


def create_app(broker_url: str, settings: Settings) -> Celery:
    """A Celery app talking to ``broker_url`` (no result backend: see the module doc).

    Raises :class:`SettingsError` when ``broker_url`` is neither Redis nor AMQP (kombu
    would take a URL without a scheme for an AMQP host and retry it forever)."""
    try:
        check_broker_url(broker_url)
    except ValueError as exc:
        raise SettingsError(f"SBX_BROKER_URL (or --broker) {exc}") from None
    amqp = is_amqp_url(broker_url)
    redis_broker = is_redis_url(broker_url)
    app = Celery(
        "sbx",
        # "redis+socket://" names kombu's transport in its scheme, which would win over
        # broker_transport below: it names sbx's instead (redis_transport.ALIAS).
        broker=_with_sbx_transport(broker_url) if redis_broker else broker_url,
        set_as_current=False,
        amqp=_amqp_class(own_queue_prefix(settings.queue)) if amqp else None,
    )
    transport: dict[str, Any] = {}
    if redis_broker:
        transport = {
            # kombu's Redis transport, dropping a malformed message instead of stopping
            # the worker (worker.broker.redis_transport).
            "broker_transport": redis_transport.TRANSPORT,
            # No kombu ack emulation: it costs two broker round trips per message (park
            # the message in an "unacked" hash, then remove it), and with early acks it
            # only covers the instant between BRPOP and the task's start, by re-running
            # the message a visibility timeout later, long after its caller gave up.
            # sbx's own claim key already makes each call run at most once.
            "broker_transport_options": {"ack_emulation": False},
            # Redis-only in Celery (ignored with a warning elsewhere): take a message
            # only when a thread is free to run it.
            "worker_disable_prefetch": True,
        }
    elif amqp:
        transport = {
            # Publisher confirms: send_task returns once RabbitMQ has the message, so
            # "no error" means "sent" (BrokerUnavailable says when it was not).
            "broker_transport_options": {"confirm_publish": True},
        }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=False,
        # With early acks a running call holds no QoS slot, so a worker reserves at most
        # ``concurrency`` calls beyond those running (AMQP); Redis: see worker_disable_prefetch.
        worker_prefetch_multiplier=1,
        task_default_queue=settings.queue,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        worker_enable_remote_control=False,
        # Early acks: a lost connection has no unacked task to cancel (and this silences
        # Celery's deprecation warning about the default changing in 6.0).
        worker_cancel_long_running_tasks_on_connection_loss=False,
        enable_utc=True,
        **transport,
    )
    return app


def _with_sbx_transport(url: str) -> str:
    """``url`` with its ``redis+`` transport prefix naming sbx's Redis transport
    (``redis+socket://x`` -> ``sbx-redis+socket://x``); other URLs as they are."""
    head, sep, rest = url.partition("+")
    if sep and head.lower() == "redis" and "://" in rest:
        return f"{redis_transport.ALIAS}+{rest}"
    return url


OWN_QUEUE_EXPIRES_S = 3600
"""AMQP: a worker's own queue outlives its last consumer this long, then RabbitMQ drops it.

Long enough to ride out a broker outage (the worker declares it again on
reconnecting); short enough that dead workers' queues do not pile up.
"""


def worker_queue(name: str) -> Queue:
    """A worker's own queue as that worker declares it (AMQP).

    Durable, so a RabbitMQ restart keeps queued actions, and expiring, so the
    queue of a worker that is gone disappears (``x-expires``; a message routed to
    it afterwards is discarded). Clients publish to it by name (the ``sbx``
    direct exchange) and never declare it: declaring with other arguments
    fails, and without arguments it would outlive its worker.
    """
    arguments = {"x-expires": OWN_QUEUE_EXPIRES_S * 1000}
    queue: Queue = Queue(  # type: ignore[no-untyped-call]
        name, routing_key=name, durable=True, queue_arguments=arguments
    )
    return queue


def _amqp_class(own_prefix: str) -> type[AMQP]:
    """Celery's AMQP helper whose missing queues named ``<queue>.w.*`` are never declared."""

    class SbxQueues(Queues):  # type: ignore[misc]
        def new_missing(self, name: str) -> Queue:
            queue: Queue = super().new_missing(name)
            if name.startswith(own_prefix):
                # Another worker's own queue: it declared it (worker_queue); just publish.
                queue = Queue(name, routing_key=name, no_declare=True)  # type: ignore[no-untyped-call]
            return queue

    class SbxAMQP(AMQP):  # type: ignore[misc]
        queues_cls = SbxQueues

    return SbxAMQP
