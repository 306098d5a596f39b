"""Prometheus metrics of one worker (``SBX_METRICS_ADDR``; off when unset).

Contract:

* :func:`worker.service.metrics_hooks.start_metrics` serves ``/metrics`` on
  ``SBX_METRICS_ADDR`` (a bare port binds 127.0.0.1) from a registry of this
  worker's own, and wires the observations in; with the setting unset, nothing of
  this is imported or observed.
* Labels take values from closed sets only: tool names the registry knows
  (else ``other``), backend names (else ``other``), call statuses
  (:data:`CALL_STATUSES`, else ``ok``), approval decisions, redaction rule
  names. No label ever carries a session id, a call id, a command or anything
  a caller chose freely.
* Counts of the moment (sandboxes live, processes running, leases held, calls
  running, approvals pending) are read from the worker's runtime when scraped.

docs/operations.md lists every metric.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from worker.service.runtime import WorkerRuntime

CALL_STATUSES = frozenset(
    {"approval_required", "blocked", "denied", "busy", "cancelled", "invalid", "lost", "error",
     "not_found", "unsupported", "forbidden", "handed_off"}
)  # fmt: skip
"""Outcomes a call is counted under besides ``ok`` (any result without one of these)."""

APPROVAL_DECISIONS = ("required", "approved", "denied")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600, 3600)
_CREATE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
_PENDING_TRACKED_MAX = 10_000


class WorkerMetrics:
    """The metrics of one worker and the methods that observe them (thread-safe)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        for standard in (ProcessCollector, PlatformCollector, GCCollector):
            standard(registry=r)  # memory, CPU, open files; Python version; GC
        self.calls = Counter(
            "sbx_calls", "Calls answered by this worker, by tool, outcome and backend.",
            ["tool", "status", "backend"], registry=r,
        )  # fmt: skip
        self.call_seconds = Histogram(
            "sbx_call_duration_seconds", "Time from a call's start on this worker to its answer.",
            ["backend"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_wait = Histogram(
            "sbx_call_queue_wait_seconds",
            "Time a call waited in the broker, from its sender's publish to its start here.",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.sandboxes_created = Counter(
            "sbx_sandboxes_created", "Sandboxes this worker created (or re-attached), by backend.",
            ["backend"], registry=r,
        )  # fmt: skip
        self.sandbox_create_seconds = Histogram(
            "sbx_sandbox_create_seconds",
            "Time to bring a new sandbox up (container, VM or connection), by backend.",
            ["backend"], buckets=_CREATE_BUCKETS, registry=r,
        )  # fmt: skip
        self.receipts = Counter(
            "sbx_receipts_written", "Background processes ended with their receipt stored.",
            registry=r,
        )  # fmt: skip
        self.approvals = Counter(
            "sbx_approvals", "Approvals required by calls here, and answers taken here.",
            ["decision"], registry=r,
        )  # fmt: skip
        self.session_moves = Counter(
            "sbx_session_moves", "Sessions re-homed on this worker from another one.", registry=r
        )
        self.broker_reconnects = Counter(
            "sbx_broker_reconnects", "Times this worker's consumer reconnected to the broker.",
            registry=r,
        )  # fmt: skip
        for decision in APPROVAL_DECISIONS:
            self.approvals.labels(decision)  # exported at 0 from the start
        self._pending: dict[str, None] = {}
        self._lock = threading.Lock()
        self._consumer_starts = 0

    # -- observations (called from metrics_hooks) ----------------------------------------

    def call_answered(
        self, tool: str, status: str, backend: str, seconds: float, moved: bool
    ) -> None:
        self.calls.labels(tool, status, backend).inc()
        self.call_seconds.labels(backend).observe(seconds)
        if moved:
            self.session_moves.inc()

    def approval_required(self, approval_id: str) -> None:
        self.approvals.labels("required").inc()
        with self._lock:
            if len(self._pending) < _PENDING_TRACKED_MAX:
                self._pending[approval_id] = None

    def approval_answered(self, decision: str) -> None:
        if decision in APPROVAL_DECISIONS:
            self.approvals.labels(decision).inc()

    def consumer_started(self) -> None:
        """The consumer (re)connected; every start after the first is a reconnect."""
        with self._lock:
            self._consumer_starts += 1
            again = self._consumer_starts > 1
        if again:
            self.broker_reconnects.inc()

    def pending_approvals(self) -> Iterable[str]:
        with self._lock:
            return list(self._pending)

    def forget_approvals(self, approval_ids: Iterable[str]) -> None:
        with self._lock:
            for approval_id in approval_ids:
                self._pending.pop(approval_id, None)


class RuntimeCollector(Collector):
    """Counts of the moment, read from the worker's runtime at each scrape."""

    def __init__(self, metrics: WorkerMetrics, svc: WorkerRuntime) -> None:
        self.metrics = metrics
        self.svc = svc

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked collector: collect() runs only when scraped

    def collect(self) -> Iterator[Metric]:
        from process_registry.redact import redaction_counts

        svc = self.svc
        live = GaugeMetricFamily(
            "sbx_sandboxes_live", "Sandboxes open on this worker, by backend.", labels=["backend"]
        )
        for backend, count in sorted(svc.pool.live_by_backend().items()):
            live.add_metric([backend], count)
        yield live
        yield GaugeMetricFamily(
            "sbx_calls_running", "Calls running on this worker now.",
            value=svc.heartbeat.running(),
        )  # fmt: skip
        manager = svc.components.get("processes")
        table = getattr(manager, "table", None)
        yield GaugeMetricFamily(
            "sbx_processes_running", "Background processes this worker watches now.",
            value=table.live_count() if table is not None else 0,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "sbx_leases_held", "Sessions this worker serves (holds the lease of).",
            value=svc.leases.held_count() if svc.leases is not None else 0,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "sbx_approvals_pending",
            "Approvals required by calls here that nobody answered yet and that have not expired.",
            value=self._pending_approvals(),
        )  # fmt: skip
        redactions = CounterMetricFamily(
            "sbx_redactions", "Secrets replaced by the redactor in this worker, by rule.",
            labels=["rule"],
        )  # fmt: skip
        for rule, count in sorted(redaction_counts().items()):
            redactions.add_metric([rule], count)
        yield redactions

    def _pending_approvals(self) -> int:
        guard = self.svc.components.get("approval")
        store = getattr(guard, "store", None)
        if store is None:
            return 0
        now, settled, pending = time.time(), [], 0
        for approval_id in self.metrics.pending_approvals():
            try:
                record = store.get(approval_id)
            except Exception:  # the ledger is unreachable: report what is known to be open
                pending += 1
                continue
            if record is None or record.status != "pending" or record.expired(now):
                settled.append(approval_id)
            else:
                pending += 1
        self.metrics.forget_approvals(settled)
        return pending
