"""Running calls off Celery's threads: one queue per session, one pool of runners.

A Celery thread only takes a call in (verify, claim, lease) and hands it here;
it is free again in a millisecond or two, so the worker keeps taking messages
however long commands run. Here:

* each session's calls run one at a time, in arrival order (a session shell is
  serial), and a call waiting for its session's shell holds no thread at all;
* calls of different sessions run in parallel on up to ``max_running`` runner
  threads, so one busy session delays another's call by at most one call's
  service time when runners are free;
* a session with ``per_session`` calls already in flight gets ``busy`` for the
  next one at once, instead of an unbounded queue;
* :meth:`SessionDispatcher.drain` lets a shutting-down worker finish (or
  cancel) what it took; :meth:`SessionDispatcher.sessions` and ``on_idle`` tell it
  which sessions still have calls here, and when each has none left.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Job = Callable[[], object]


@dataclass
class _Session:
    waiting: deque[Job] = field(default_factory=deque)
    running: bool = False


class Busy(Exception):
    """The session has as many calls in flight as it may."""


class SessionDispatcher:
    """Per-session FIFO queues drained by a bounded pool of runner threads."""

    def __init__(self, *, max_running: int, per_session: int) -> None:
        self.per_session = per_session
        self._pool = ThreadPoolExecutor(max_workers=max_running, thread_name_prefix="sbx-call")
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self.on_idle: Callable[[str], object] | None = None
        """Called with a session's id when its last call in flight here was answered (on
        the runner thread; its errors are logged)."""

    def submit(self, session_id: str, job: Job) -> None:
        """Run ``job`` after the session's earlier calls. Raises :class:`Busy` (and runs
        nothing) when the session already has ``per_session`` calls in flight."""
        # The job runs in the submitter's context (the call's log context goes along).
        job = functools.partial(contextvars.copy_context().run, job)
        with self._lock:
            state = self._sessions.setdefault(session_id, _Session())
            if len(state.waiting) + state.running >= self.per_session:
                raise Busy(
                    f"this session already has {self.per_session} calls in flight "
                    "(SBX_SESSION_MAX_IN_FLIGHT); wait for one to finish"
                )
            self._in_flight += 1
            if state.running:
                state.waiting.append(job)
                return
            state.running = True
        self._pool.submit(self._drain, session_id, job)

    def _drain(self, session_id: str, job: Job) -> None:
        while True:
            try:
                job()
            except Exception:  # a job answers its own call; this only keeps the runner alive
                log.exception("a call of a session failed outside its own error handling")
            with self._lock:
                self._in_flight -= 1
                state = self._sessions[session_id]
                if not state.waiting:
                    state.running = False
                    del self._sessions[session_id]
                    self._idle.notify_all()
                    break
                job = state.waiting.popleft()
        on_idle = self.on_idle
        if on_idle is not None:
            try:
                on_idle(session_id)
            except Exception:
                log.warning("the hook of a session with no call left failed", exc_info=True)

    def sessions(self) -> set[str]:
        """The sessions with calls running or queued here."""
        with self._lock:
            return set(self._sessions)

    def in_flight(self) -> int:
        """Calls taken in and not yet answered."""
        with self._lock:
            return self._in_flight

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every call taken in has been answered."""
        with self._lock:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def close(self) -> None:
        """Stop the runners once their work is done (call :meth:`drain` first)."""
        self._pool.shutdown(wait=False, cancel_futures=False)
