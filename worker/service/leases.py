"""This worker's leases: which sessions it serves, and carrying their state across workers.

Contracts:

* :meth:`SessionLeases.admit` decides, before a call is claimed, whether this
  worker serves its session: it keeps a lease it holds (no round trip while
  its presence has not lapsed), takes over a free or expired one atomically,
  or names the queue of the present worker that holds it (the caller hands the
  call over there).
* A session taken over from another worker is *moved*: :meth:`SessionLeases.rehome`
  rebuilds it in its sandbox (re-attached by the backend, which finds a remote
  sandbox again by its deterministic name) with the recorded cwd and exported
  variables, ends the previous worker's stale shell where this worker can
  reach it, and says what could not be restored.
* After a call, :meth:`SessionLeases.record` stores the session's state when it
  changed (one write, none when nothing changed), and only while this worker holds
  the lease.
* Before a call it took in runs, :meth:`SessionLeases.confirm` says whether it still
  may: a worker whose presence lapsed (paused, cut off) while calls queued may have
  lost the session to another worker, which serves it now, and the queued calls were
  declared lost; running them later would run a command twice over two workers. It
  asks the ledger only when that can have happened (most calls run at once after their
  claim, within the worker's unbroken presence); each call's delivery renews the lease
  and the state (:meth:`SessionLeases.renewal`), so they outlive the session's last call.
"""

from __future__ import annotations

import logging
import threading
import time

from environments.base import Environment, ShellIdentity, ShellState
from environments.pool import SandboxPool
from worker.protocol.leases import (
    Acquired,
    LeaseBook,
    LeaseRenewal,
    SessionState,
    lease_key,
    state_key,
)
from worker.service.stranded_calls import register_own_queue

log = logging.getLogger(__name__)

_TAKE_OVER_WAIT_S = 300.0
"""How long a moved session's call waits for the take-over rebuilding it (its steps are
bounded by the backends' own deadlines; this only guards against a hung one)."""


class SessionLeases:
    """The leases of worker ``worker_id`` (own queue ``own_queue``) in ``book``."""

    def __init__(self, book: LeaseBook, worker_id: str, own_queue: str) -> None:
        self.book = book
        self.worker_id = worker_id
        self.own_queue = own_queue
        self._held: set[str] = set()
        self._served: set[str] = set()
        """Sessions this process has served since it started. A session whose state names
        this worker's id but is not here was served by an earlier process with the same
        id -- a restart that got the same pid (a container's init runs the worker as the
        same pid every time) -- and is rebuilt from its state like any moved session."""
        self._recorded: dict[str, tuple[object, ...]] = {}
        self._taken: dict[str, tuple[str, list[str]]] = {}
        """Sessions this worker took over before any call of theirs came (a lost call's
        session): the previous holder and what the move said, told with the next call."""
        self._moving: dict[str, tuple[str, threading.Event]] = {}
        """Sessions :meth:`take_over` is rebuilding now: the previous holder, and set when
        done. A call admitted meanwhile is a moved one and waits for the rebuild."""
        self._confirmed: dict[str, float] = {}
        """When (monotonic) the ledger last said this worker holds a session's lease,
        within the current run of unbroken presence."""
        self._present_until = 0.0
        """Until when (monotonic) this worker's presence surely has not lapsed: no other
        worker can have taken a lease confirmed since it was last renewed."""
        self._lock = threading.Lock()

    # -- presence ----------------------------------------------------------------------

    def announce(self) -> None:
        """Renew this worker's presence (its heartbeat). If it had lapsed, other workers
        may have taken its sessions: every lease is checked again on its next call."""
        sent = time.monotonic()
        kept = self.book.announce(self.worker_id, self.own_queue)
        with self._lock:
            # Half the presence's lifetime: room for a late tick and for clocks that differ.
            self._present_until = sent + self.book.presence_ttl_ms / 2000
            if not kept:
                self._held.clear()
                self._confirmed.clear()
        if not kept:
            # Present (again): its own queue is consumed, so calls sent there wait for it
            # instead of being moved to the shared queue (``worker.service.stranded_calls``).
            register_own_queue(self.book.client, self.own_queue, self.worker_id)

    def withdraw(self) -> None:
        """Give up every lease and the presence (graceful shutdown)."""
        with self._lock:
            held, self._held = set(self._held), set()
        for session_id in held:
            try:
                self.book.release(session_id, self.worker_id)
            except Exception:
                log.warning("could not release the lease of a session", exc_info=True)
        self.book.withdraw(self.worker_id)

    # -- leases ------------------------------------------------------------------------

    def admit(self, session_id: str) -> Acquired:
        """Serve ``session_id`` here (``mine``), or the queue of the worker that does.

        A lease held here is trusted without asking the ledger only while this worker's
        presence surely has not lapsed: a worker resumed after a pause may take a call
        in before its next heartbeat notices that another worker took the session."""
        with self._lock:
            if session_id in self._held and time.monotonic() < self._present_until:
                return Acquired(mine=True, taken_over_from=self._moved_from(session_id))
        outcome = self.book.acquire(session_id, self.worker_id)
        if outcome.mine:
            with self._lock:
                self._held.add(session_id)
                self._confirmed[session_id] = time.monotonic()
                served_here = session_id in self._served
                self._served.add(session_id)
                moved_from = self._moved_from(session_id)
            if outcome.taken_over_from is None and moved_from is not None:
                return Acquired(mine=True, taken_over_from=moved_from)
            if outcome.taken_over_from is None:
                state = self.book.state(session_id)
                if state is not None and (state.worker != self.worker_id or not served_here):
                    # The previous holder released it (shutdown, idle), or was an earlier
                    # process under this worker's id: still a move.
                    return Acquired(mine=True, taken_over_from=state.worker)
        else:
            self._drop(session_id)  # taken over while this worker's presence lapsed
        return outcome

    def _moved_from(self, session_id: str) -> str | None:
        """The previous holder of a session taken over here whose next call has not
        come yet (None: none); with ``_lock`` held."""
        taken = self._taken.get(session_id)
        if taken is not None:
            return taken[0]
        moving = self._moving.get(session_id)
        return moving[0] if moving is not None else None

    def release_idle(self, busy: set[str]) -> int:
        """Give up the leases of held sessions not in ``busy`` (a worker stopping: those
        sessions' next calls move at once instead of waiting out its grace); how many."""
        with self._lock:
            idle = self._held - busy
        for session_id in idle:
            self.release(session_id)
        return len(idle)

    def release(self, session_id: str) -> None:
        """This worker no longer serves ``session_id`` (its sandboxes here are closed)."""
        with self._lock:
            self._held.discard(session_id)
            self._confirmed.pop(session_id, None)
            self._recorded.pop(session_id, None)
        self.book.release(session_id, self.worker_id)

    def held_count(self) -> int:
        """How many sessions this worker holds the lease of."""
        with self._lock:
            return len(self._held)

    def holds(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._held

    def confirm(self, session_id: str, delivered_key: str, taken_at: float) -> str | None:
        """Why a call this worker took in for ``session_id`` at ``taken_at`` (monotonic)
        must not run now (None: it may run): it was answered already (``delivered_key``,
        its ``delivered`` mark, exists: declared lost while it queued), or another worker
        serves the session now, or did meanwhile. A lease that expired unused (idle past
        the retention) is taken again when no other worker recorded the session since.

        Asks the ledger (one round trip, renewing the lease and state) unless nothing of
        that can have happened: the lease was confirmed during this worker's unbroken
        presence, which cannot have lapsed yet, and the call was taken in so recently
        that its claim's heartbeat still stands (a call is declared lost only without
        one). Most calls run at once, and skip the round trip."""
        now = time.monotonic()
        with self._lock:
            confirmed = self._confirmed.get(session_id)
            quiet = self.book.presence_ttl_ms / 2000
            if (
                confirmed is not None
                and session_id in self._held
                and now < self._present_until
                and now - taken_at < quiet
                and now - confirmed < self.book.retention / 2
            ):
                return None
        holder, delivered = self.book.still_mine(session_id, self.worker_id, delivered_key)
        if delivered:
            return "it was answered already (declared lost) while it queued"
        mine = holder == self.worker_id
        if not mine and holder is None:
            outcome = self.book.acquire(session_id, self.worker_id)
            state = self.book.state(session_id) if outcome.mine else None
            mine = outcome.mine and (state is None or state.worker == self.worker_id)
        if mine:
            with self._lock:
                self._confirmed[session_id] = now
            return None
        self._drop(session_id)
        return "another worker serves its session now"

    def renewal(self, session_id: str) -> LeaseRenewal:
        """What a call's delivery renews: ``session_id``'s lease and state, for another
        retention while this worker holds the lease."""
        return LeaseRenewal(
            lease_key(session_id), state_key(session_id), self.worker_id, self.book.retention
        )

    def _drop(self, session_id: str) -> None:
        """Forget a lease another worker took: its next call is admitted afresh."""
        with self._lock:
            self._confirmed.pop(session_id, None)
            self._held.discard(session_id)
            self._recorded.pop(session_id, None)

    def serves_elsewhere(self, session_id: str) -> bool:
        """True while another present worker holds the session's lease."""
        holder = self.book.holder(session_id)
        return holder is not None and holder != self.worker_id and self.book.present(holder)

    # -- session state -----------------------------------------------------------------

    def record(self, session_id: str, backend: str, env: Environment) -> None:
        """Store the session's state after a call, if it changed since the last record."""
        state = env.session_state()
        if state is None:
            return
        shell = env.shell_identity()
        seen = (backend, env.sandbox_id, state.cwd, state.env, shell)
        with self._lock:
            if self._recorded.get(session_id) == seen:
                return  # most calls change nothing: no write, no serialising
        stored = self.book.record(
            session_id,
            SessionState(
                worker=self.worker_id,
                backend=backend,
                sandbox_id=env.sandbox_id,
                cwd=state.cwd,
                env=state.env,
                shell_pid=shell.pid if shell else None,
                shell_start=shell.start_time if shell else None,
            ),
        )
        if not stored:  # another worker took the session over meanwhile: its state stands
            self._drop(session_id)
            return
        with self._lock:
            self._recorded[session_id] = seen

    def take_over(self, session_id: str, pool: SandboxPool) -> bool:
        """Serve now the session of a call whose worker died (its lease lapsed), ending in
        its sandbox what that worker left running; the session's next call says it moved.
        False when another present worker serves it, or nothing is known of it."""
        state = self.book.state(session_id)
        done = threading.Event()
        with self._lock:
            served_here = session_id in self._served
            if state is None or (state.worker == self.worker_id and served_here):
                return False
            if session_id in self._moving or session_id in self._held:
                return False  # being taken over, or a call of it already took it here
            # Before the lease is taken: a call admitted from then on is a moved one.
            self._moving[session_id] = (state.worker, done)
        try:
            outcome = self.admit(session_id)
            if not outcome.mine or outcome.taken_over_from is None:
                return False
            with pool.use(session_id, state.backend) as env:
                notes = self._rebuild(session_id, backend=state.backend, env=env)
            with self._lock:
                self._taken[session_id] = (outcome.taken_over_from, notes)
        finally:
            with self._lock:
                self._moving.pop(session_id, None)
            done.set()
        log.info("took over a session of absent worker %s", outcome.taken_over_from)
        return True

    def rehome(self, session_id: str, backend: str, env: Environment) -> list[str]:
        """Continue a moved session in ``env``; what could not be restored, one line each.
        While :meth:`take_over` rebuilds the session, waits for it (up to
        ``_TAKE_OVER_WAIT_S``) and tells what it found."""
        with self._lock:
            moving = self._moving.get(session_id)
        if moving is not None:
            moving[1].wait(_TAKE_OVER_WAIT_S)
        with self._lock:
            taken = self._taken.pop(session_id, None)
        if taken is not None:
            return taken[1]  # rebuilt already, when this worker took it over
        return self._rebuild(session_id, backend=backend, env=env)

    def _rebuild(self, session_id: str, *, backend: str, env: Environment) -> list[str]:
        """Attach ``env`` to the session's sandbox, end the previous worker's shell there
        and restore the recorded cwd and variables; what could not be restored."""
        state = self.book.state(session_id)
        if state is None:
            return ["no recorded state: the session starts afresh"]
        problems: list[str] = []
        if state.backend != backend:
            return [f"the session's state was recorded on the {state.backend!r} backend"]
        sandbox_id = env.attach()
        same_sandbox = sandbox_id == state.sandbox_id or (
            env.processes_on_worker_host and _host(state.worker) == _host(self.worker_id)
        )
        if state.shell_pid is not None and same_sandbox:
            # A foreground command of the dead worker may still run there: end it.
            stale = ShellIdentity(pid=state.shell_pid, start_time=state.shell_start)
            if env.end_stale_shell(stale):
                problems.append(
                    "the previous worker's shell here was ended, with any command it still ran"
                )
        if not same_sandbox and not env.processes_on_worker_host:
            problems.append(
                f"the sandbox {state.sandbox_id} is gone; files and processes in it are lost"
            )
        env.restore_session_state(ShellState(cwd=state.cwd, env=state.env))
        return problems


def _host(worker_id: str) -> str:
    return worker_id.rpartition(":")[0]
