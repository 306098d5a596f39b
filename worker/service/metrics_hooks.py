"""Serving the worker's metrics (:func:`start_metrics`) and where they are observed:
Celery's ``task_prerun``, the task layer's answers (:mod:`worker.service.call_observers`),
the sandbox pool's ``on_created`` and the process table's ``on_finished``.

A call is taken in when its task starts (``task_prerun``: its tool, backend and start
time are noted, its queue wait measured from the sender's ``sbx_sent_at`` header) and
observed when its answer is delivered, on whichever thread runs it; a call handed to
another worker, or one Celery failed or ignored, is settled too. Only closed sets of
label values leave this module (see :mod:`worker.service.metrics`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from celery.signals import task_postrun, task_prerun
from prometheus_client import disable_created_metrics, start_http_server

from environments.base import Environment
from environments.registry import backend_names, canonical_name
from registry.core import registry as tool_registry
from worker.protocol.tasks import APPROVAL_TASK, SENT_AT_HEADER, TOOL_CALL_TASK
from worker.service.call_observers import add_answer_observer
from worker.service.metrics import CALL_STATUSES, RuntimeCollector, WorkerMetrics
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings, parse_address

log = logging.getLogger(__name__)

_TAKEN_MAX = 100_000
"""Calls noted and not yet answered, at most (the oldest are forgotten beyond it)."""


@dataclass(frozen=True)
class _Taken:
    task: str
    tool: str
    backend: str
    began: float


def start_metrics(settings: Settings, svc: WorkerRuntime) -> WorkerMetrics | None:
    """Serve this worker's metrics on ``settings.metrics_addr`` and start observing
    (None, and nothing started, when it is unset). Raises ``OSError`` when the
    address cannot be bound."""
    if settings.metrics_addr is None:
        return None
    # No *_created series: they double what a scrape reads.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    metrics = WorkerMetrics()
    metrics.registry.register(RuntimeCollector(metrics, svc))
    observe(metrics, svc)
    host, port = parse_address(settings.metrics_addr)
    start_http_server(port, addr=host, registry=metrics.registry)
    log.info("metrics on http://%s/metrics", settings.metrics_addr)
    return metrics


def observe(metrics: WorkerMetrics, svc: WorkerRuntime) -> None:
    """Connect ``metrics`` to the worker's tasks, answers, sandbox pool and process table."""
    backends = frozenset(backend_names())
    default_backend = svc.settings.backend
    taken: OrderedDict[str, _Taken] = OrderedDict()
    lock = threading.Lock()

    def started(task_id: str | None = None, task: Any = None, args: Any = None, **_: Any) -> None:
        name = getattr(task, "name", None)
        message = args[0] if isinstance(args, list | tuple) and args else None
        if task_id is None or name not in (TOOL_CALL_TASK, APPROVAL_TASK):
            return
        sent = getattr(getattr(task, "request", None), SENT_AT_HEADER, None)
        if isinstance(sent, int | float) and not isinstance(sent, bool):
            # Clocks of the sender's and this machine may differ: never below zero.
            metrics.queue_wait.observe(max(0.0, time.time() - float(sent)))
        fields = message if isinstance(message, dict) else {}
        tool = fields.get("tool")
        note = _Taken(
            task=str(name),
            tool=tool if isinstance(tool, str) and tool_registry.get(tool) else "other",
            backend=_backend_label(fields.get("backend") or default_backend, backends),
            began=time.monotonic(),
        )
        with lock:
            taken[task_id] = note
            while len(taken) > _TAKEN_MAX:
                taken.popitem(last=False)

    def answered(call_id: str, answer: str | None) -> None:
        with lock:
            note = taken.pop(call_id, None)
        if note is None:
            return  # a ping, or a call this worker did not take in
        if note.task == APPROVAL_TASK:
            metrics.approval_answered(str(_json_object(answer).get("status")))
            return
        _call_answered(metrics, note, answer, time.monotonic() - note.began)

    def ended(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
        if task_id is not None and state != "SUCCESS":  # failed or ignored (a redelivery)
            with lock:
                taken.pop(task_id, None)

    task_prerun.connect(started, weak=False)
    task_postrun.connect(ended, weak=False)
    add_answer_observer(answered)
    svc.pool.on_created = lambda backend, env: _sandbox_created(metrics, backend, env)
    table = getattr(svc.components.get("processes"), "table", None)
    if table is not None:
        table.on_finished = _counting(metrics, table.on_finished)


def _call_answered(
    metrics: WorkerMetrics, note: _Taken, answer: str | None, seconds: float
) -> None:
    if answer is None:  # handed to the worker holding the session: it answers
        metrics.call_answered(note.tool, "handed_off", note.backend, seconds, moved=False)
        return
    result = _json_object(answer)
    status = result.get("status")
    if status not in CALL_STATUSES:
        error_only = result.get("error") and result.get("exit_code") is None
        status = "error" if error_only and "process_id" not in result else "ok"
    moved = result.get("session_moved") is True
    metrics.call_answered(note.tool, str(status), note.backend, seconds, moved=moved)
    if status == "approval_required" and isinstance(result.get("approval_id"), str):
        metrics.approval_required(result["approval_id"])


def _backend_label(name: Any, known: frozenset[str]) -> str:
    label = canonical_name(name) if isinstance(name, str) else ""
    return label if label in known else "other"


def _json_object(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _sandbox_created(metrics: WorkerMetrics, backend: str, env: Environment) -> None:
    """Count a new sandbox and time bringing it up now (its first command would do it
    otherwise; a failure is left for that command to report)."""
    metrics.sandboxes_created.labels(backend).inc()
    began = time.monotonic()
    try:
        env.attach()
    except Exception as exc:
        log.warning("a new %s sandbox did not come up: %s", backend, exc)
        return
    metrics.sandbox_create_seconds.labels(backend).observe(time.monotonic() - began)


def _counting(metrics: WorkerMetrics, then: Any) -> Any:
    def finished(process_id: str, owner: str) -> None:
        metrics.receipts.inc()
        if then is not None:
            then(process_id, owner)

    return finished
