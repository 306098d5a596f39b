"""Where the worker's metrics are observed: Celery's task signals, the sandbox pool's
``on_created`` and the process table's ``on_finished``.

A call is observed when its task ends (``task_postrun``): its tool, backend and
outcome come from the call message and the result JSON, its latency from the
task's start, its queue wait from the sender's ``sbx_sent_at`` header. Only
closed sets of label values leave this module (see :mod:`worker.service.metrics`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from celery.signals import task_postrun, task_prerun

from environments.base import Environment
from environments.registry import backend_names, canonical_name
from registry.core import registry as tool_registry
from worker.protocol.tasks import APPROVAL_TASK, SENT_AT_HEADER, TOOL_CALL_TASK
from worker.service.metrics import CALL_STATUSES, WorkerMetrics
from worker.service.runtime import WorkerRuntime

log = logging.getLogger(__name__)

_started = threading.local()  # the task running on this thread: its monotonic start


def observe(metrics: WorkerMetrics, svc: WorkerRuntime) -> None:
    """Connect ``metrics`` to the worker's task signals, sandbox pool and process table."""
    backends = frozenset(backend_names())
    default_backend = svc.settings.backend

    def started(task: Any = None, **_: Any) -> None:
        _started.at = time.monotonic()
        sent = getattr(getattr(task, "request", None), SENT_AT_HEADER, None)
        if isinstance(sent, int | float) and not isinstance(sent, bool):
            # Clocks of the sender's and this machine may differ: never below zero.
            metrics.queue_wait.observe(max(0.0, time.time() - float(sent)))

    def ended(task: Any = None, args: Any = None, retval: Any = None, **_: Any) -> None:
        began = getattr(_started, "at", None)
        seconds = time.monotonic() - began if began is not None else 0.0
        _started.at = None
        name = getattr(task, "name", None)
        message = args[0] if isinstance(args, list | tuple) and args else None
        if not isinstance(message, dict):
            return
        if name == TOOL_CALL_TASK:
            backend = _backend_label(message.get("backend") or default_backend, backends)
            _call_answered(metrics, message, retval, backend, seconds)
        elif name == APPROVAL_TASK:
            answer = _json_object(retval)
            metrics.approval_answered(str(answer.get("status")))

    task_prerun.connect(started, weak=False)
    task_postrun.connect(ended, weak=False)
    svc.pool.on_created = lambda backend, env: _sandbox_created(metrics, backend, env)
    table = getattr(svc.components.get("processes"), "table", None)
    if table is not None:
        table.on_finished = _counting(metrics, table.on_finished)


def _call_answered(
    metrics: WorkerMetrics, message: dict[str, Any], retval: Any, backend: str, seconds: float
) -> None:
    tool = message.get("tool")
    tool_label = tool if isinstance(tool, str) and tool_registry.get(tool) is not None else "other"
    if retval is None:  # handed to the worker holding the session: it answers
        metrics.call_answered(tool_label, "handed_off", backend, seconds, moved=False)
        return
    result = _json_object(retval)
    status = result.get("status")
    if status not in CALL_STATUSES:
        error_only = result.get("error") and result.get("exit_code") is None
        status = "error" if error_only and "process_id" not in result else "ok"
    metrics.call_answered(
        tool_label, str(status), backend, seconds, moved=result.get("session_moved") is True
    )
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
