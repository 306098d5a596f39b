"""The heartbeat thread: keeps this worker's running calls alive in the ledger."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

from registry.context import Cancellation
from worker.protocol.ledger import CallLedger

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Daemon thread that refreshes the heartbeats of this worker's running calls."""

    def __init__(
        self,
        ledger: CallLedger,
        worker_id: str,
        interval: float,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="sbx-heartbeat", daemon=True)
        self.on_tick = on_tick
        """Runs at every tick too (the worker's presence); its errors are logged."""
        self.ledger = ledger
        self.worker_id = worker_id
        self.interval = interval
        self._active: dict[str, threading.Event] = {}
        self._finished: list[str] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._cancelling: str | None = None
        self._presence_failures = 0

    def add(self, call_id: str, cancel: threading.Event | None = None) -> None:
        """Beat for ``call_id`` until :meth:`finish`; set ``cancel`` if it gets cancelled
        (at once after :meth:`cancel_all`: a call starting then is cancelled too)."""
        event = cancel or threading.Event()
        with self._lock:
            self._active[call_id] = event
            reason = self._cancelling
        if reason is not None:
            _cancel(event, reason)

    def finish(self, call_id: str) -> None:
        """Stop beating for ``call_id`` and release it on the next tick.

        Releasing off the call's path saves a round trip per call; until then the
        call still looks running, which is harmless: its result is stored, and
        the lost-call check never overrides a stored result.
        """
        with self._lock:
            self._active.pop(call_id, None)
            self._finished.append(call_id)

    def stop(self) -> None:
        self._stop_event.set()

    def cancel_all(self, reason: str = "the worker shutting down") -> list[str]:
        """Cancel every running call, and every call that starts from now on (the
        shutdown grace is over); the ids of those running."""
        with self._lock:
            self._cancelling = reason
            active = dict(self._active)
        for event in active.values():
            _cancel(event, reason)
        return list(active)

    def running(self) -> int:
        """How many calls this worker runs now."""
        with self._lock:
            return len(self._active)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.tick()
        self.tick()

    def tick(self) -> None:
        """Refresh running calls' heartbeats and release finished ones (one round trip)."""
        with self._lock:
            active = dict(self._active)
            finished, self._finished = self._finished, []
        if self.on_tick is not None:
            self._renew_presence(self.on_tick)
        try:
            self.ledger.beat(list(active), self.worker_id, finished=finished)
            for call_id in self.ledger.cancelled(list(active)):
                active[call_id].set()
        except (redis.RedisError, OSError):
            with self._lock:
                self._finished.extend(finished)

    def _renew_presence(self, renew: Callable[[], None]) -> None:
        """Run ``renew``; an outage is logged once when it starts (one line: it is the
        broker's state, not a defect here) and once when it ends."""
        try:
            renew()
        except (redis.RedisError, OSError) as exc:
            self._presence_failures += 1
            if self._presence_failures == 1:
                log.warning(
                    "could not renew this worker's presence (retrying every %gs): %s",
                    self.interval,
                    exc,
                )
            return
        if self._presence_failures:
            log.warning(
                "this worker's presence is renewed again, after %d failed attempt(s)",
                self._presence_failures,
            )
            self._presence_failures = 0


def _cancel(event: threading.Event, reason: str) -> None:
    if isinstance(event, Cancellation):
        event.cancel(reason)
    else:
        event.set()
