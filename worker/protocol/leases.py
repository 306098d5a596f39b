"""Which worker serves a session: presence, leases and the session's recorded state.

Kept in the ledger, so every worker and client of a fleet sees the same:

* *presence* ``sbx:worker:<worker id>`` -> the worker's own queue, expiring
  ``presence_ttl`` after its last heartbeat: a worker without presence is dead;
* a *lease* ``sbx:lease:<session id>`` -> the worker serving the session. It is
  valid while its holder is present; a call for a session without a valid
  lease takes it over atomically (:meth:`LeaseBook.acquire`), so two workers
  never serve one session at once;
* the session's *state* ``sbx:session-state:<session id>``: its shell's cwd and
  exported variables and its sandbox descriptor, written after calls that
  changed them, so the next worker rebuilds the session. Exported values often
  hold secrets: they live here only, never in a log or a file.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import redis
from pydantic import BaseModel, ConfigDict, Field

WORKER_PREFIX = "sbx:worker:"
LEASE_PREFIX = "sbx:lease:"
STATE_PREFIX = "sbx:session-state:"


class LeaseRenewal(NamedTuple):
    """A session's lease and recorded state, renewed with a delivery while ``worker_id``
    holds the lease (:meth:`~worker.protocol.ledger.CallLedger.deliver`)."""

    lease_key: str
    state_key: str
    worker_id: str
    seconds: int


def presence_key(worker_id: str) -> str:
    return WORKER_PREFIX + worker_id


def lease_key(session_id: str) -> str:
    return LEASE_PREFIX + session_id


def state_key(session_id: str) -> str:
    return STATE_PREFIX + session_id


# The queue of the session's lease holder while it is present; else nothing.
_ROUTE = """
local holder = redis.call('GET', KEYS[1])
if not holder then return false end
return redis.call('GET', ARGV[1] .. holder)
"""

# {1, ''}: the lease was ours; {2, previous holder or ''}: taken now;
# {0, holder's queue, holder}: another present worker holds it.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return {1, ''}
end
if holder then
  local queue = redis.call('GET', ARGV[2] .. holder)
  if queue then return {0, queue, holder} end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return {2, holder or ''}
"""

# Store a session's state only while ARGV[1] holds its lease: a worker that lost the lease
# (its presence lapsed, another took the session over) must not overwrite what the new
# holder recorded, or the session's next move would rebuild a stale cwd and environment.
_RECORD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
"""

# The lease's holder, and whether a result of the call was delivered already. A call about
# to run on the holder renews the lease and the session's state: both outlive the
# session's *last* call by the retention (a call that changes nothing writes no state).
_STILL_MINE = """
local holder = redis.call('GET', KEYS[1]) or ''
local delivered = redis.call('EXISTS', KEYS[2])
if holder == ARGV[1] and delivered == 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
return {holder, delivered}
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class SessionState(BaseModel):
    """What a new worker needs to continue a session where the last one left it."""

    model_config = ConfigDict(frozen=True)

    worker: str
    """The worker that recorded it."""
    backend: str
    sandbox_id: str
    cwd: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    shell_pid: int | None = None
    """Pid (in the sandbox) of the recording worker's session shell, so a successor can
    end what that shell left running."""
    shell_start: int | None = None
    """Kernel start time of ``shell_pid``: a reused pid is never signalled."""


class Acquired(BaseModel):
    """The outcome of :meth:`LeaseBook.acquire`."""

    model_config = ConfigDict(frozen=True)

    mine: bool
    """This worker serves the session now."""
    taken_over_from: str | None = None
    """The holder whose lease expired (it died or stopped) when this worker took it."""
    holder_queue: str | None = None
    """When not ``mine``: the own queue of the present worker holding the lease."""
    holder: str | None = None
    """When not ``mine``: that worker's id."""


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class LeaseBook:
    """Presence, leases and session states in the ledger ``client``.

    ``presence_ttl`` bounds how long a dead worker keeps its leases;
    ``retention`` how long a lease or a session's state outlives its last use.
    """

    def __init__(
        self, client: redis.Redis, *, presence_ttl: float = 10.0, retention: int = 7 * 86400
    ) -> None:
        self.client = client
        self.presence_ttl_ms = max(1, int(presence_ttl * 1000))
        self.retention = retention
        self._route = client.register_script(_ROUTE)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._record = client.register_script(_RECORD)
        self._still_mine = client.register_script(_STILL_MINE)

    # -- presence ----------------------------------------------------------------------

    def announce(self, worker_id: str, own_queue: str) -> bool:
        """Mark ``worker_id`` present (with its own queue) for another ``presence_ttl``.

        False when its presence had lapsed before this call (its leases may have been
        taken over meanwhile).
        """
        previous = self.client.set(
            presence_key(worker_id), own_queue, px=self.presence_ttl_ms, get=True
        )
        return previous is not None

    def withdraw(self, worker_id: str) -> None:
        """This worker is going away: it holds nothing from now on."""
        self.client.delete(presence_key(worker_id))

    def present(self, worker_id: str) -> bool:
        """True while ``worker_id`` keeps announcing itself."""
        return bool(self.client.exists(presence_key(worker_id)))

    def queue_of(self, worker_id: str) -> str | None:
        """The own queue of ``worker_id`` while it is present."""
        value = self.client.get(presence_key(worker_id))
        return None if value is None else _s(value)

    # -- leases ------------------------------------------------------------------------

    def route(self, session_id: str) -> str | None:
        """The own queue of the present worker serving ``session_id`` (one round trip)."""
        queue = self._route(keys=[lease_key(session_id)], args=[WORKER_PREFIX])
        return None if not queue else _s(queue)

    def holder(self, session_id: str) -> str | None:
        """The worker named by the session's lease (present or not)."""
        value = self.client.get(lease_key(session_id))
        return None if value is None else _s(value)

    def acquire(self, session_id: str, worker_id: str) -> Acquired:
        """Take (or keep) the lease of ``session_id`` for ``worker_id`` unless a present
        worker holds it; atomic, so racing workers end with one holder."""
        code, value, *rest = self._acquire(
            keys=[lease_key(session_id)], args=[worker_id, WORKER_PREFIX, self.retention]
        )
        if int(code) == 0:
            return Acquired(mine=False, holder_queue=_s(value), holder=_s(rest[0]))
        previous = _s(value) if int(code) == 2 and value else None
        return Acquired(mine=True, taken_over_from=previous)

    def release(self, session_id: str, worker_id: str) -> None:
        """Give the lease up if ``worker_id`` holds it."""
        self._release(keys=[lease_key(session_id)], args=[worker_id])

    def held_by_present(self, session_id: str) -> bool:
        """True while a present worker holds the session's lease."""
        return self.route(session_id) is not None

    # -- session state -----------------------------------------------------------------

    def record(self, session_id: str, state: SessionState) -> bool:
        """Store the session's state for the worker that serves it next, if ``state.worker``
        holds its lease (False, nothing stored: another worker serves the session now)."""
        # json, not pydantic's serialiser: a value or cwd the shell reported in bytes that
        # are not UTF-8 is held as surrogate escapes, which only json writes (as \udcXX).
        return bool(
            self._record(
                keys=[lease_key(session_id), state_key(session_id)],
                args=[state.worker, json.dumps(state.model_dump()), self.retention],
            )
        )

    def still_mine(
        self, session_id: str, worker_id: str, delivered_key: str
    ) -> tuple[str | None, bool]:
        """``(holder, delivered)`` for a call of ``session_id`` that ``worker_id`` took in
        and is about to run: the lease's holder (None: nobody) and whether a result of the
        call was delivered already (``delivered_key`` exists: declared lost while it
        queued). When ``worker_id`` holds it, the lease and the session's state are
        renewed for another ``retention``."""
        holder, delivered = self._still_mine(
            keys=[lease_key(session_id), delivered_key, state_key(session_id)],
            args=[worker_id, self.retention],
        )
        return (_s(holder) or None), bool(int(delivered))

    def state(self, session_id: str) -> SessionState | None:
        """The session's last recorded state (None: never recorded or expired)."""
        raw = self.client.get(state_key(session_id))
        if raw is None:
            return None
        try:
            return SessionState.model_validate(json.loads(raw))
        except ValueError:
            return None

    def forget(self, session_id: str) -> None:
        """Drop the session's state (it ended)."""
        self.client.delete(state_key(session_id))
