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
  the shared queue, oldest first -- two reapers never move one message twice (a
  Redis queue moves in one atomic step, an AMQP message goes to one consumer), and the
  claim key runs a call at most once however often it was sent. Other messages
  (pings, receipt requests, which only that worker's home can answer) stay where they
  are; a queue left empty (or gone) is unregistered, an AMQP queue once drained (see
  :func:`amqp_mover`).
* Redis brokers move a queue in one Lua script; AMQP brokers message by message
  (``worker.broker.amqp_drain``: published onward before it is acknowledged).
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


Mover = Callable[[str], "tuple[int, int] | None"]
"""Moves the tool calls of one queue to the shared queue: ``(moved, left)`` (None: the
queue does not exist)."""


def redis_mover(broker: redis.Redis, shared_queue: str) -> Mover:
    """A :data:`Mover` for a Redis broker (one atomic script per queue)."""

    def move(queue: str) -> tuple[int, int]:
        moved, left = broker.eval(_MOVE, 2, queue, shared_queue, TOOL_CALL_TASK)  # type: ignore[misc]
        return int(moved), int(left)

    return move


def amqp_mover(broker_url: str, shared_queue: str) -> Mover:
    """A :data:`Mover` for an AMQP broker (message by message, on its own connection).

    It never reports messages left: each ``basic.get`` counts as a use of the queue and
    would keep a dead worker's queue from ever expiring, so once its tool calls are
    moved the queue is let go (its other messages expire with it, as they always did)."""
    from worker.broker.amqp_drain import ToolCallDrainer

    drainer = ToolCallDrainer(broker_url, TOOL_CALL_TASK)

    def move(queue: str) -> tuple[int, int] | None:
        drained = drainer.drain(queue, shared_queue)
        return None if drained is None else (drained[0], 0)

    return move


def requeue_stranded(ledger: redis.Redis, book: LeaseBook, move: Mover) -> int:
    """Move the tool calls stranded on absent workers' own queues to the shared queue
    (``move``); how many were moved."""
    raw: dict[Any, Any] = ledger.hgetall(OWN_QUEUES_KEY)  # type: ignore[assignment]
    moved_total = 0
    for queue_b, worker_b in raw.items():
        queue, worker = _s(queue_b), _s(worker_b)
        if book.present(worker):
            continue
        outcome = move(queue)
        moved, left = outcome if outcome is not None else (0, 0)
        if moved:
            log.warning(
                "moved %d call(s) waiting on the queue of absent worker %s to the shared queue",
                int(moved),
                worker,
            )
        # Unregistered only if still absent: a worker restarted under that id (same pid
        # in a container) registers the queue again when it is present again.
        if not left and not book.present(worker):
            ledger.hdel(OWN_QUEUES_KEY, queue)
        moved_total += moved
    return moved_total


def stranded_requeuer(svc: WorkerRuntime, broker_url: str) -> Callable[[], int] | None:
    """What the reaper of worker ``svc`` runs to move stranded calls (None: a runtime
    without leases)."""
    if svc.leases is None:
        return None
    book, shared = svc.leases.book, svc.settings.queue
    if is_amqp_url(broker_url):
        move = amqp_mover(broker_url, shared)
    else:
        move = redis_mover(redis_client(broker_url), shared)
    return lambda: requeue_stranded(svc.ledger.client, book, move)
