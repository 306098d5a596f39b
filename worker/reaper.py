"""Turning calls whose worker died into ``lost`` results."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis
from celery import Celery, states

from environments.factory import backend_class
from environments.pool import SandboxPool

from .liveness import CallLedger, lost_result

log = logging.getLogger(__name__)


def declare_lost(app: Celery, ledger: CallLedger, call_id: str, worker_id: str | None) -> bool:
    """Store a ``lost`` result for ``call_id`` unless it has a result. True if it stored one."""
    meta = app.backend.get_task_meta(call_id)
    ledger.forget(call_id)
    if meta.get("status") in states.READY_STATES:
        return False
    app.backend.store_result(call_id, lost_result(call_id, worker_id), states.SUCCESS)
    log.warning("call %s declared lost (worker %s stopped beating)", call_id, worker_id)
    return True


def reap_lost_calls(app: Celery, ledger: CallLedger) -> list[str]:
    """Declare every running call whose heartbeat expired lost; return their ids."""
    lost = []
    for call_id, worker_id in ledger.running_calls().items():
        if ledger.is_lost(call_id) and declare_lost(app, ledger, call_id, worker_id):
            lost.append(call_id)
    return lost


class Reaper(threading.Thread):
    """Daemon thread that, every ``interval`` seconds, reaps lost calls and idle sandboxes.

    Every ``orphan_sweep_interval`` seconds it also asks each backend in use to
    remove sandboxes that dead workers left behind (idle over ``orphan_max_idle``).
    """

    def __init__(
        self,
        app: Celery,
        ledger: CallLedger,
        interval: float,
        pool: SandboxPool | None = None,
        *,
        orphan_max_idle: float = 6 * 3600.0,
        orphan_sweep_interval: float = 300.0,
    ) -> None:
        super().__init__(name="sbx-reaper", daemon=True)
        self.app, self.ledger, self.interval, self.pool = app, ledger, interval, pool
        self.orphan_max_idle = orphan_max_idle
        self.orphan_sweep_interval = orphan_sweep_interval
        self._next_orphan_sweep = 0.0
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            with contextlib.suppress(redis.RedisError, OSError):
                reap_lost_calls(self.app, self.ledger)
            if self.pool is not None:
                self._reap_sandboxes(self.pool)

    def _reap_sandboxes(self, pool: SandboxPool) -> None:
        try:
            closed = pool.reap_idle()
            if closed:
                log.info("closed %d idle sandbox(es)", closed)
            now = time.monotonic()
            if now < self._next_orphan_sweep:
                return
            self._next_orphan_sweep = now + self.orphan_sweep_interval
            for backend in pool.backends_in_use():
                removed = backend_class(backend).reap_orphans(self.orphan_max_idle)
                if removed:
                    log.info("removed %d orphaned %s sandbox(es)", len(removed), backend)
        except Exception:  # a broken backend must not stop the reaper
            log.exception("reaping sandboxes failed")
