"""sbx's own state in the ledger (a Redis): claims, heartbeats, mailboxes, routes.

* A call id is *claimed* (``SET NX``) before its command runs; a redelivered
  message finds the claim and does nothing, so a command never runs twice.
* While a call runs, its worker refreshes a heartbeat key. A claimed call with
  no heartbeat and no result is *lost*: its worker died. Whoever notices first
  (a client waiting on it, or any worker's reaper) delivers a ``lost`` result.
* A call's result goes to its own *mailbox* (a Redis list) instead of Celery's
  result backend: one round trip for the worker, one blocking pop for the
  client. The first result delivered for a call id wins (the real one, or
  ``lost``); a mailbox is read once and expires with the claim.
* A running background process has a *route* naming the queue of the worker
  that holds it, so its actions reach that worker.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis

from worker.protocol.mac import MAX_CLOCK_SKEW_S
from worker.protocol.revocations import SEEDED_KEY, epoch_key, parse_epoch
from worker.protocol.streams import Piece, stream_key

if TYPE_CHECKING:  # a worker renews leases; a client never does
    from worker.protocol.leases import LeaseRenewal

log = logging.getLogger(__name__)

RUNNING_KEY = "sbx:calls:running"
SESSIONS_KEY = "sbx:calls:sessions"
ORPHANED_KEY = "sbx:sessions:orphaned"
"""Sessions whose running call was declared lost, for a reaper to take over."""
"""call id -> session id of running calls (whose session a lost call leaves behind)."""
ROUTE_PREFIX = "sbx:process:"


def claim_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:claim"


def heartbeat_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:hb"


def cancel_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:cancel"


def result_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:result"


def delivered_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:delivered"


def answer_key(call_id: str) -> str:
    return f"sbx:call:{call_id}:answer"


# Claim, first heartbeat and running-set entry in one round trip; with KEYS[7] and
# KEYS[8] (the session's revocation epoch and the ledger's seeded mark) also their values,
# which the caller's proof is checked against next. Returns {status, epoch, seeded}:
# status 1 when claimed, 0 when claimed before, 2 when claimed but cancelled before it ran.
# A claim handed to this worker (value "handoff:<worker>") is taken over like a new one.
_CLAIM_SCRIPT = """
local function answer(status)
  if #KEYS < 8 then return {status, '', ''} end
  local e = redis.call('MGET', KEYS[7], KEYS[8])
  return {status, e[1] or '', e[2] or ''}
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return answer(0)
end
local fresh = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
if not fresh then
  if redis.call('GET', KEYS[1]) ~= 'handoff:' .. ARGV[1] then return answer(0) end
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
-- A heartbeat either way: a cancelled call is alive until its "cancelled" result is in.
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
if redis.call('EXISTS', KEYS[4]) == 1 then
  return answer(2)
end
redis.call('HSET', KEYS[3], ARGV[4], ARGV[1])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[6], ARGV[4], ARGV[5]) end
return answer(1)
"""

# Hand a claimed call to another worker: it claims it when it takes the message, and
# must do so within lost_after (the heartbeat set here), else the call is lost.
_HANDOFF_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'handoff:' .. ARGV[2], 'EX', ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[2])
return 1
"""

CLAIMED, DUPLICATE, CANCELLED = 1, 0, 2

# First result wins: mark the call delivered, fill its mailbox and keep a copy (for a
# caller that collects it again) in one step. With KEYS[4] and KEYS[5] (a session's lease
# and recorded state) also renew both for ARGV[5] seconds while ARGV[4] holds the lease:
# a lease outlives its session's last call, at no round trip of its own.
_DELIVER_SCRIPT = """
if #KEYS >= 5 and redis.call('GET', KEYS[4]) == ARGV[4] then
  redis.call('EXPIRE', KEYS[4], ARGV[5])
  redis.call('EXPIRE', KEYS[5], ARGV[5])
end
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
  redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[3])
  return 1
end
return 0
"""


def claim_lifetime(claim_ttl: int) -> int:
    """Seconds a call's claim (and its ``delivered`` mark, its cancel request) must live
    for proofs that verify ``claim_ttl`` seconds after they were issued (SBX_CLAIM_TTL).

    A proof's issue time may lie up to ``MAX_CLOCK_SKEW_S`` ahead of the worker's
    clock (a sender whose clock runs fast), so it verifies up to ``claim_ttl`` plus
    that skew after the call was claimed: the claim lives as long, else a replay of
    the message after the claim expired would verify and run the call again.
    """
    return claim_ttl + MAX_CLOCK_SKEW_S


class CallLedger:
    """Claims, heartbeats and lost detection for tool calls.

    ``claim_ttl``: how long a claim is kept; pass :func:`claim_lifetime` of the
    proof window (as workers and senders do).
    """

    def __init__(
        self, client: redis.Redis, *, claim_ttl: int, lost_after: float, result_ttl: int = 3600
    ) -> None:
        self.client = client
        self.claim_ttl = claim_ttl
        self.result_ttl = result_ttl
        self.lost_after = lost_after
        self.lost_after_ms = int(lost_after * 1000)
        self._quiet_until = 0.0
        self._claim = client.register_script(_CLAIM_SCRIPT)
        self._handoff = client.register_script(_HANDOFF_SCRIPT)
        self._deliver = client.register_script(_DELIVER_SCRIPT)

    def claim(self, call_id: str, worker_id: str, session_id: str = "") -> int:
        """Claim ``call_id`` for this worker: :data:`CLAIMED`, :data:`DUPLICATE` (someone
        claimed it before) or :data:`CANCELLED` (claimed now, but cancelled while queued)."""
        return self._claim_call(call_id, worker_id, session_id, [])[0]

    def claim_reading_epoch(
        self, call_id: str, worker_id: str, session_id: str
    ) -> tuple[int, int | None]:
        """:meth:`claim`, and in the same round trip ``session_id``'s revocation epoch
        (``worker.protocol.revocations``; None when the ledger was not seeded, so the
        epoch must be read the long way). ``session_id`` must be a valid session id."""
        status, epoch, seeded = self._claim_call(
            call_id, worker_id, session_id, [epoch_key(session_id), SEEDED_KEY]
        )
        return status, (parse_epoch(epoch) if seeded else None)

    def _claim_call(
        self, call_id: str, worker_id: str, session_id: str, epoch_keys: list[str]
    ) -> tuple[int, str, str]:
        keys = [
            claim_key(call_id),
            heartbeat_key(call_id),
            RUNNING_KEY,
            cancel_key(call_id),
            delivered_key(call_id),  # answered already (e.g. lost): never run it now
            SESSIONS_KEY,
            *epoch_keys,
        ]
        args: list[str | int] = [
            worker_id, self.claim_ttl, self.lost_after_ms, call_id, session_id
        ]
        status, epoch, seeded = self._claim(keys=keys, args=args)
        return int(status), _s(epoch), _s(seeded)

    def deliver(self, call_id: str, result: str, renew: LeaseRenewal | None = None) -> bool:
        """Put ``result`` in the call's mailbox unless a result was delivered before; in the
        same round trip renew the session lease and state of ``renew`` (while its worker
        holds that lease).

        True when this one was delivered; False when another (e.g. ``lost``) got there first.
        """
        keys = [delivered_key(call_id), result_key(call_id), answer_key(call_id)]
        args: list[str | int] = [result, self.claim_ttl, self.result_ttl]
        if renew is not None:
            keys += [renew.lease_key, renew.state_key]
            args += [renew.worker_id, renew.seconds]
        with self._noting_outage():
            return bool(self._deliver(keys=keys, args=args))

    def answer(self, call_id: str) -> str | None:
        """The kept copy of the call's delivered result (None: none, or it expired)."""
        with self._noting_outage():
            value = self.client.get(answer_key(call_id))
        return None if value is None else _s(value)

    def hand_off(self, call_id: str, worker_id: str, to_worker: str) -> bool:
        """Pass this worker's claim of ``call_id`` to ``to_worker``; False if not ours."""
        keys = [claim_key(call_id), heartbeat_key(call_id), RUNNING_KEY]
        args: list[str | int] = [
            worker_id, to_worker, self.claim_ttl, self.lost_after_ms, call_id
        ]
        return bool(self._handoff(keys=keys, args=args))

    def claimed(self, call_id: str) -> bool:
        """True once a worker claimed the call (it runs, or ran)."""
        with self._noting_outage():
            return bool(self.client.exists(claim_key(call_id)))

    def take_result(self, call_id: str, timeout: float) -> str | None:
        """The call's result, waiting up to ``timeout`` seconds; None if none came.

        Taking empties the mailbox: each result is read once.
        """
        with self._noting_outage():
            # BLPOP's timeout 0 means "forever": never pass it through.
            popped: Any = self.client.blpop([result_key(call_id)], timeout=max(0.001, timeout))
        return None if popped is None else _s(popped[1])

    def take_streamed(self, call_id: str, timeout: float) -> str | Piece | None:
        """The next piece of the call's stream, else its result, waiting up to ``timeout``
        seconds (None: neither came). Pieces come first: all of them precede the result."""
        keys = [stream_key(call_id), result_key(call_id)]
        with self._noting_outage():
            popped: Any = self.client.blpop(keys, timeout=max(0.001, timeout))
        if popped is None:
            return None
        key, value = popped
        return _s(value) if _s(key) == keys[1] else Piece(bytes(value))

    @contextlib.contextmanager
    def _noting_outage(self) -> Iterator[None]:
        """Note a lost connection: heartbeats may have expired meanwhile (see :meth:`is_lost`)."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError):
            self._quiet_until = time.monotonic() + self.lost_after
            raise

    def collected(self, call_id: str) -> bool:
        """True when the call's result was delivered and has been taken already."""
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(delivered_key(call_id))
        pipe.llen(result_key(call_id))
        delivered, waiting = pipe.execute()
        return bool(delivered) and not waiting

    def request_cancel(self, call_id: str) -> None:
        """Ask whichever worker runs (or will run) ``call_id`` to stop it."""
        self.client.set(cancel_key(call_id), "1", ex=self.claim_ttl)

    def cancelled(self, call_ids: list[str]) -> set[str]:
        """The ids among ``call_ids`` whose cancellation was requested."""
        if not call_ids:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for call_id in call_ids:
            pipe.exists(cancel_key(call_id))
        return {c for c, hit in zip(call_ids, pipe.execute(), strict=True) if hit}

    def beat(
        self, call_ids: list[str], worker_id: str, finished: Sequence[str] = ()
    ) -> None:
        """Refresh the heartbeats of running calls; release the ``finished`` ones."""
        if not call_ids and not finished:
            return
        pipe = self.client.pipeline(transaction=False)
        for call_id in call_ids:
            pipe.set(heartbeat_key(call_id), worker_id, px=self.lost_after_ms)
        for call_id in finished:
            pipe.delete(heartbeat_key(call_id))
            pipe.hdel(RUNNING_KEY, call_id)
            pipe.hdel(SESSIONS_KEY, call_id)
        with self._noting_outage():
            pipe.execute()

    def is_lost(self, call_id: str) -> bool:
        """True when the call was claimed, has no result and its worker stopped beating.

        Never True within ``lost_after`` of a connection error seen by this ledger:
        heartbeats expire while the broker is unreachable (or paused), and the
        worker needs one beat after it is back to show it is alive.
        """
        if time.monotonic() < self._quiet_until:
            return False
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(claim_key(call_id))
        pipe.exists(heartbeat_key(call_id))
        pipe.exists(delivered_key(call_id))
        with self._noting_outage():
            claimed, beating, delivered = pipe.execute()
        return bool(claimed) and not beating and not delivered

    def running_calls(self) -> dict[str, str]:
        """``{call_id: worker_id}`` of calls believed to be running."""
        with self._noting_outage():
            raw: dict[Any, Any] = self.client.hgetall(RUNNING_KEY)  # type: ignore[assignment]
        return {_s(k): _s(v) for k, v in raw.items()}

    def forget(self, call_id: str) -> None:
        """Drop a call from the running set (after it was declared lost)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(RUNNING_KEY, call_id)
        pipe.hdel(SESSIONS_KEY, call_id)
        pipe.execute()

    def orphaned_sessions(self, most: int = 100) -> list[str]:
        """Take (remove and return) up to ``most`` sessions whose call was declared lost."""
        popped: Any = self.client.spop(ORPHANED_KEY, most)
        return [_s(s) for s in popped or []]

    def session_of(self, call_id: str) -> str | None:
        """The session of a running (or just lost) call, when its claim named one."""
        value = self.client.hget(SESSIONS_KEY, call_id)
        return None if value is None else _s(value)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def lost_result(call_id: str, worker_id: str | None) -> str:
    """The tool result of a call whose worker died after taking it, before answering."""
    who = f" ({worker_id})" if worker_id else ""
    return json.dumps(
        {
            "status": "lost",
            "error": f"the worker that took this call{who} died before it answered; the "
            "command may still be running, or may have run partly or wholly. Check the "
            "session's state before retrying.",
            "call_id": call_id,
        },
        ensure_ascii=False,
    )


def declare_lost(ledger: CallLedger, call_id: str, worker_id: str | None) -> bool:
    """Deliver a ``lost`` result for ``call_id`` unless it has a result. True if it did.

    The call's session is noted as orphaned: a live worker's reaper takes it over and
    ends what the dead worker left running (:meth:`CallLedger.orphaned_sessions`)."""
    session_id = ledger.session_of(call_id)
    if session_id:
        ledger.client.sadd(ORPHANED_KEY, session_id)
    ledger.forget(call_id)
    if not ledger.deliver(call_id, lost_result(call_id, worker_id)):
        return False
    log.warning("call %s declared lost (worker %s stopped beating)", call_id, worker_id)
    return True


def route_key(process_id: str) -> str:
    """Redis key naming the worker queue that holds ``process_id``."""
    return ROUTE_PREFIX + process_id


def receipt_route_key(process_id: str) -> str:
    """Redis key naming the worker whose ``SBX_HOME`` holds the receipt of ``process_id``."""
    return f"sbx:receipt-at:{process_id}"


def read_route(
    client: redis.Redis, process_id: str, *, receipt: bool = False
) -> dict[str, str] | None:
    """The route of ``process_id`` (``{"queue", "session", "worker"}``), or None;
    ``receipt``: where its receipt is instead."""
    key = receipt_route_key(process_id) if receipt else route_key(process_id)
    return parse_route(client.get(key))


def parse_route(raw: Any) -> dict[str, str] | None:
    """A stored route (``{"queue", "session", "worker"}``), or None for nothing or garbage."""
    if not raw:
        return None
    try:
        route = json.loads(raw)
    except ValueError:
        return None
    return route if isinstance(route, dict) and route.get("queue") else None
