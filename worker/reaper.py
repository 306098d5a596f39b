"""Turning calls whose worker died into ``lost`` results."""

from __future__ import annotations

import contextlib
import logging
import threading

import redis
from celery import Celery, states

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
    """Daemon thread that, every ``interval`` seconds, reaps lost calls and idle sandboxes."""

    def __init__(
        self, app: Celery, ledger: CallLedger, interval: float, pool: SandboxPool | None = None
    ) -> None:
        super().__init__(name="sbx-reaper", daemon=True)
        self.app, self.ledger, self.interval, self.pool = app, ledger, interval, pool
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            with contextlib.suppress(redis.RedisError, OSError):
                reap_lost_calls(self.app, self.ledger)
            if self.pool is not None:
                try:
                    closed = self.pool.reap_idle()
                except Exception:  # a broken sandbox must not stop the reaper
                    log.exception("reaping idle sandboxes failed")
                else:
                    if closed:
                        log.info("closed %d idle sandbox(es)", closed)
