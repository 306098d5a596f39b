"""Putting the worker's :class:`~worker.service.processes.ProcessManager` into its runtime.

Built at start-up (with the fleet's shared checkpoints and forwarding when the
worker has its own queue), asked to adopt dead workers' processes once the
worker is ready, and closed at shutdown -- its processes live on for an adopter.
"""

from __future__ import annotations

from typing import Any

from worker.identity import sealer
from worker.service.fleet_processes import SharedCheckpoints
from worker.service.forwarding import ProcessForwarder
from worker.service.processes import ProcessManager
from worker.settings import Settings

RECEIPTS_PURPOSE = "receipts"
"""The purpose receipts' and chain heads' seals are derived for."""


def install_process_manager(
    runtime: Any, settings: Settings, worker_queue: str | None = None
) -> ProcessManager:
    """Build the worker's :class:`ProcessManager` into ``runtime.components["processes"]``.

    ``runtime`` is the worker's ``WorkerRuntime``; routes go to its ledger's
    Redis. Idempotent: a second call returns the installed service.
    """
    existing = runtime.components.get("processes")
    if isinstance(existing, ProcessManager):
        return existing
    service = ProcessManager(
        settings,
        runtime.pool,
        redis_client=runtime.ledger.client,
        worker_queue=worker_queue,
        worker_id=runtime.worker_id,
        receipt_sealer=sealer(runtime.signer, RECEIPTS_PURPOSE),
    )
    if worker_queue is not None:
        service.forwarder = ProcessForwarder(runtime, worker_queue)
    if runtime.leases is not None:
        shared = SharedCheckpoints(
            runtime.ledger.client, runtime.leases.book, service.table.checkpoints.me
        )
        service.shared = shared
        service.table.writer_gone = shared.writer_gone
        service.table.claim = service.claim
        service.table.on_started = shared.put
    runtime.components["processes"] = service
    runtime.pool.keep_alive = service.holds_running
    # A restarted worker has a new queue: it answers for the receipts its home keeps now.
    service.routes.serve_receipts_of(service.table.receipts.heads.sessions())
    return service


def adopt_processes(runtime: Any) -> dict[str, Any] | None:
    """At ``worker_ready``: adopt the checkpoints of dead workers (None: no service)."""
    service = runtime.components.get("processes")
    if not isinstance(service, ProcessManager):
        return None
    return service.adopt_all()


def close_process_manager(runtime: Any) -> None:
    """At ``worker_shutdown``, before the pool closes: stop watching (processes live on)."""
    service = runtime.components.get("processes")
    if isinstance(service, ProcessManager):
        service.close()
