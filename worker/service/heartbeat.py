"""The heartbeat thread: keeps this worker's running calls alive in the ledger."""

from __future__ import annotations

import threading

import redis

from worker.protocol.ledger import CallLedger


class Heartbeat(threading.Thread):
    """Daemon thread that refreshes the heartbeats of this worker's running calls."""

    def __init__(self, ledger: CallLedger, worker_id: str, interval: float) -> None:
        super().__init__(name="sbx-heartbeat", daemon=True)
        self.ledger = ledger
        self.worker_id = worker_id
        self.interval = interval
        self._active: dict[str, threading.Event] = {}
        self._finished: list[str] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def add(self, call_id: str, cancel: threading.Event | None = None) -> None:
        """Beat for ``call_id`` until :meth:`finish`; set ``cancel`` if it gets cancelled."""
        with self._lock:
            self._active[call_id] = cancel or threading.Event()

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

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.tick()
        self.tick()

    def tick(self) -> None:
        """Refresh running calls' heartbeats and release finished ones (one round trip)."""
        with self._lock:
            active = dict(self._active)
            finished, self._finished = self._finished, []
        try:
            self.ledger.beat(list(active), self.worker_id, finished=finished)
            for call_id in self.ledger.cancelled(list(active)):
                active[call_id].set()
        except (redis.RedisError, OSError):
            with self._lock:
                self._finished.extend(finished)
