"""Session leases of two workers on a real Redis ledger: a worker whose presence lapsed
(paused, cut off) must not go on trusting the leases it held before."""

from __future__ import annotations

import threading
import uuid

import redis

from environments.base import ShellIdentity, ShellState
from environments.pool import SandboxPool
from tests.fakes.environment import MemoryEnvironment
from tests.helpers import wait_until
from worker.protocol.leases import LeaseBook, SessionState
from worker.service.leases import SessionLeases


def two_workers(
    redis_url: str, first: str, second: str
) -> tuple[LeaseBook, str, SessionLeases, SessionLeases]:
    """A ledger with a short presence, a new session, and two workers' leases in it; the
    first worker present and holding the session."""
    book = LeaseBook(redis.Redis.from_url(redis_url), presence_ttl=0.3)
    session = f"s-{uuid.uuid4().hex[:12]}"
    a = SessionLeases(book, f"w-{first}-{session}", f"q-{first}-{session}")
    b = SessionLeases(book, f"w-{second}-{session}", f"q-{second}-{session}")
    a.announce()
    assert a.admit(session).mine
    return book, session, a, b


def test_a_call_taken_in_after_a_lapse_of_presence_goes_to_the_new_holder(
    external_redis_url: str,
) -> None:
    book, session, paused, other = two_workers(external_redis_url, "paused", "other")
    # The first worker stops renewing its presence (a SIGSTOP); once it lapsed, the
    # other one takes the session's next call, and its lease.
    wait_until(lambda: not book.present(paused.worker_id), 30, "the presence to lapse")
    other.announce()
    taken = other.admit(session)
    assert taken.mine and taken.taken_over_from == paused.worker_id, taken
    # Resumed, the first worker takes a call in before its next heartbeat.
    late = paused.admit(session)
    assert not late.mine and late.holder == other.worker_id, late
    assert late.holder_queue == other.own_queue
    assert not paused.holds(session)


class _HeldSandbox(MemoryEnvironment):
    """A sandbox whose ``attach`` (the first step of rebuilding a moved session) holds
    until ``go`` is set; it ends the dead worker's shell it is asked to."""

    def __init__(self, session_id: str, go: threading.Event) -> None:
        super().__init__(session_id)
        self.go = go
        self.attaching = threading.Event()
        self.ended: list[ShellIdentity] = []
        self.restored: list[ShellState] = []

    def attach(self) -> str:
        self.attaching.set()
        assert self.go.wait(60)
        return self.sandbox_id

    def end_stale_shell(self, shell: ShellIdentity) -> bool:
        self.ended.append(shell)
        return True

    def restore_session_state(self, state: ShellState) -> None:
        self.restored.append(state)


def test_a_call_admitted_while_its_session_is_taken_over_is_told_it_moved(
    external_redis_url: str,
) -> None:
    book, session, dead, heir = two_workers(external_redis_url, "dead", "heir")
    assert book.record(session, SessionState(worker=dead.worker_id, backend="memory",
                                             sandbox_id=f"memory:{session}", cwd="/tmp",
                                             shell_pid=77, shell_start=15))  # fmt: skip
    wait_until(lambda: not book.present(dead.worker_id), 30, "the presence to lapse")
    heir.announce()
    go = threading.Event()
    sandbox = _HeldSandbox(session, go)
    pool = SandboxPool(lambda backend, sid: sandbox)
    # The reaper takes the lost call's session over; the sandbox holds it mid-rebuild.
    taking = threading.Thread(target=heir.take_over, args=(session, pool))
    taking.start()
    assert sandbox.attaching.wait(60)
    # The session's next call comes now: it is a moved one, and waits for the rebuild.
    admitted = heir.admit(session)
    assert admitted.mine and admitted.taken_over_from == dead.worker_id, admitted
    notes: list[list[str]] = []
    call = threading.Thread(target=lambda: notes.append(heir.rehome(session, "memory", sandbox)))
    call.start()
    go.set()
    taking.join(timeout=60)
    call.join(timeout=60)
    assert not call.is_alive()
    assert notes == [["the previous worker's shell here was ended, with any command it still ran"]]
    # Rebuilt once, by the take-over: the call did not end the shell a second time.
    assert sandbox.ended == [ShellIdentity(pid=77, start_time=15)]
    assert [s.cwd for s in sandbox.restored] == ["/tmp"]
    # Told once: the call after it is not a moved one.
    assert heir.admit(session).taken_over_from is None
