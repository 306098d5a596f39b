"""What an operator runs a worker with: metrics, the health probe, task events.

:func:`install_operations` wires them into a worker about to start (logging is
configured before, by :func:`worker.service.log_format.install_log_format`);
:meth:`Operations.close` undoes what outlives the process (its health record).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celery import Celery

from worker.service.events import configure_events
from worker.service.health import forget_worker, install_health, record_worker
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.service.metrics import WorkerMetrics


@dataclass
class Operations:
    """The operational pieces of one running worker."""

    worker_options: list[str]
    """Options for Celery's worker that go with them (``--without-heartbeat`` or none)."""
    metrics: WorkerMetrics | None
    health_queue: str
    record: Path

    def close(self) -> None:
        """The worker is stopping: ``sbx health`` no longer finds it."""
        forget_worker(self.record)


def install_operations(
    app: Celery,
    settings: Settings,
    svc: WorkerRuntime,
    broker_url: str,
    *,
    concurrency: int,
    events: bool = False,
) -> Operations:
    """Metrics (when ``SBX_METRICS_ADDR`` is set), the health consumer and its record,
    and task events (``events`` or ``SBX_EVENTS``) for the worker of ``app``."""
    metrics: WorkerMetrics | None = None
    if settings.metrics_addr is not None:  # prometheus_client is imported only then
        from worker.service.metrics_hooks import start_metrics

        metrics = start_metrics(settings, svc)

    def status() -> dict[str, Any]:
        return {
            "worker": svc.worker_id,
            "running": svc.heartbeat.running(),
            "max_running": settings.max_running,
            "concurrency": concurrency,
        }

    queue = install_health(
        app,
        broker_url,
        lambda: svc.ledger,
        settings.queue,
        status,
        on_connect=metrics.consumer_started if metrics is not None else None,
    )
    record = record_worker(settings.home, svc.worker_id, queue)
    options = configure_events(app, events or settings.events)
    return Operations(options, metrics, queue, record)
