"""Tool calls stranded on the own queue of a worker that died before taking them.

A client sends a leased session's calls (and a process's actions) to the own queue
of the worker holding it. When that worker dies before taking such a call, nothing
ever consumes its queue again: a client still waiting re-sends the call to the
shared queue once the worker's presence lapses, but one that stopped waiting (its
wait ran out: ``pending``, "call again with the same id") would wait on
``result(call_id)`` forever, with no ``lost`` answer either (the call was never
claimed).

Contracts:

* every worker registers its own queue in the ledger (:func:`register_own_queue`);
* :func:`requeue_stranded` (run by each worker's reaper) moves the tool-call messages
  waiting on the own queue of every registered worker that is no longer present to
  the shared queue, oldest first, in one atomic step per queue -- two reapers never
  move one message twice, and the claim key runs a call at most once however often it
  was sent. Other messages (pings, receipt requests, which only that worker's home
  can answer) stay where they are; a queue left empty is unregistered.
* Redis brokers only: an AMQP worker's own queue expires with its last consumer
  (``worker.broker.app``), its messages with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from worker.broker.connection import redis_client
from worker.broker.urls import is_amqp_url
from worker.protocol.leases import LeaseBook
from worker.protocol.tasks import TOOL_CALL_TASK

if TYPE_CHECKING:
    from worker.service.runtime import WorkerRuntime

log = logging.getLogger(__name__)

OWN_QUEUES_KEY = "sbx:worker-own-queues"
"""Ledger hash: a worker's own queue -> its worker id."""

# Kombu's Redis transport LPUSHes a message and its consumers BRPOP: the oldest is on
# the right. Moving tool calls right to left keeps their order on the shared queue; the
# rest is pushed back in its own order. Returns {moved, left}.
_MOVE = """
local kept, moved = {}, 0
while true do
  local raw = redis.call('RPOP', KEYS[1])
  if not raw then break end
  local ok, msg = pcall(cjson.decode, raw)
  if ok and type(msg) == 'table' and type(msg['headers']) == 'table'
      and msg['headers']['task'] == ARGV[1] then
    redis.call('LPUSH', KEYS[2], raw)
    moved = moved + 1
  else
    table.insert(kept, raw)
  end
end
for _, raw in ipairs(kept) do redis.call('LPUSH', KEYS[1], raw) end
return {moved, #kept}
"""


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def register_own_queue(ledger: redis.Redis, own_queue: str, worker_id: str) -> None:
    """Note that ``worker_id`` consumes ``own_queue`` (after it announced its presence)."""
    ledger.hset(OWN_QUEUES_KEY, own_queue, worker_id)


def requeue_stranded(
    ledger: redis.Redis, book: LeaseBook, broker: redis.Redis, shared_queue: str
) -> int:
    """Move the tool calls stranded on absent workers' own queues (in ``broker``) to
    ``shared_queue``; how many were moved."""
    raw: dict[Any, Any] = ledger.hgetall(OWN_QUEUES_KEY)  # type: ignore[assignment]
    moved_total = 0
    for queue_b, worker_b in raw.items():
        queue, worker = _s(queue_b), _s(worker_b)
        if book.present(worker):
            continue
        moved, left = broker.eval(_MOVE, 2, queue, shared_queue, TOOL_CALL_TASK)  # type: ignore[misc]
        if int(moved):
            log.warning(
                "moved %d call(s) waiting on the queue of absent worker %s to the shared queue",
                int(moved),
                worker,
            )
        # Unregistered only if still absent: a worker restarted under that id (same pid
        # in a container) registers the queue again when it is present again.
        if not int(left) and not book.present(worker):
            ledger.hdel(OWN_QUEUES_KEY, queue)
        moved_total += int(moved)
    return moved_total


def stranded_requeuer(svc: WorkerRuntime, broker_url: str) -> Callable[[], int] | None:
    """What the reaper of worker ``svc`` runs to move stranded calls (None: an AMQP
    broker, or a runtime without leases)."""
    if is_amqp_url(broker_url) or svc.leases is None:
        return None
    book = svc.leases.book
    broker = redis_client(broker_url)
    return lambda: requeue_stranded(svc.ledger.client, book, broker, svc.settings.queue)
