"""Turning calls whose worker died into ``lost`` results."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable

import redis

from environments.pool import SandboxPool
from environments.registry import backend_class
from worker.protocol.ledger import CallLedger, declare_lost
from worker.service.leases import SessionLeases

log = logging.getLogger(__name__)


def reap_lost_calls(ledger: CallLedger) -> list[str]:
    """Declare every running call whose heartbeat expired lost; return their ids."""
    lost = []
    for call_id, worker_id in ledger.running_calls().items():
        if ledger.is_lost(call_id) and declare_lost(ledger, call_id, worker_id):
            lost.append(call_id)
    return lost


def _kept(pool: SandboxPool, leases: SessionLeases | None, backend: str, session_id: str) -> bool:
    """A sandbox stays while its session runs processes here or a present worker serves it."""
    if pool.keep_alive(session_id, backend):
        return True
    return leases is not None and leases.book.held_by_present(session_id)


class Reaper(threading.Thread):
    """Daemon thread that, every ``interval`` seconds, reaps lost calls and idle sandboxes.

    Every ``orphan_sweep_interval`` seconds it also asks each backend in use to
    remove sandboxes that dead workers left behind (idle over ``orphan_max_idle``).
    """

    def __init__(
        self,
        ledger: CallLedger,
        interval: float,
        pool: SandboxPool | None = None,
        *,
        orphan_max_idle: float = 6 * 3600.0,
        orphan_sweep_interval: float = 300.0,
        leases: SessionLeases | None = None,
        adopt: Callable[[], object] | None = None,
        take_over: Callable[[str], object] | None = None,
        requeue: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(name="sbx-reaper", daemon=True)
        self.ledger, self.interval, self.pool = ledger, interval, pool
        self.orphan_max_idle = orphan_max_idle
        self.orphan_sweep_interval = orphan_sweep_interval
        self.leases = leases
        self.adopt = adopt
        """Takes over processes of absent workers (run at every pass): the local ones of
        another worker of this home that died, the fleet's in reachable sandboxes."""
        self.take_over = take_over
        """``take_over(session_id)``: a lost call's session -- end what its dead worker left
        running in a sandbox this worker can reach."""
        self.requeue = requeue
        """Moves calls stranded on absent workers' own queues to the shared queue."""
        self._next_orphan_sweep = 0.0
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            with contextlib.suppress(redis.RedisError, OSError):
                reap_lost_calls(self.ledger)
                if self.take_over is not None:
                    self._take_over_orphans(self.take_over)
            if self.requeue is not None:
                try:
                    self.requeue()
                except (redis.RedisError, OSError):  # the broker is away: next pass
                    log.debug("could not look for calls on absent workers' queues", exc_info=True)
            if self.adopt is not None:
                try:
                    self.adopt()
                except Exception:  # a broken sandbox must not stop the reaper
                    log.exception("taking over processes of absent workers failed")
            if self.pool is not None:
                self._reap_sandboxes(self.pool)

    def _take_over_orphans(self, take_over: Callable[[str], object]) -> None:
        for session_id in self.ledger.orphaned_sessions():
            try:
                take_over(session_id)
            except Exception:  # the session's next call tries again
                log.warning("taking over a lost call's session failed", exc_info=True)

    def _reap_sandboxes(self, pool: SandboxPool) -> None:
        try:
            pool.rest_idle()
            closed = pool.reap_idle()
            if closed:
                log.info("closed %d idle sandbox(es)", closed)
            now = time.monotonic()
            if now < self._next_orphan_sweep:
                return
            self._next_orphan_sweep = now + self.orphan_sweep_interval
            for backend in pool.backends_in_use():
                removed = backend_class(backend).reap_orphans(
                    pool.config_for(backend),
                    self.orphan_max_idle,
                    functools.partial(_kept, pool, self.leases, backend),
                )
                if removed:
                    log.info("removed %d orphaned %s sandbox(es)", len(removed), backend)
        except Exception:  # a broken backend must not stop the reaper
            log.exception("reaping sandboxes failed")
