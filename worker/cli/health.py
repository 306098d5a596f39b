"""``sbx health [--worker ID] [--timeout S]``: exit 0 only when the worker's consumer answers.

Without ``--worker``, every worker running on this machine with this ``SBX_HOME``
(``worker.service.health.local_workers``) must answer; none running is a failure.
Each is asked on its own health queue through the broker, and must answer within
the deadline (``--timeout``, default ``SBX_HEALTH_TIMEOUT``) into the ledger. The
embedded broker is never started by a probe.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from worker.errors import SbxError
from worker.settings import Settings, get_settings

from .output import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit, fail


def probe_workers(
    settings: Settings, targets: list[tuple[str, str]], timeout: float
) -> list[dict[str, Any]]:
    """Ask each ``(worker id, health queue)``; one report per worker, ``ok`` True when it
    answered within ``timeout`` seconds (shared by all)."""
    from worker.broker.connection import resolve_broker_url, resolve_ledger_url
    from worker.broker.sender import CallSender
    from worker.protocol.tasks import PING_TASK

    broker = resolve_broker_url(settings, start_embedded=False)
    ledger = resolve_ledger_url(settings, broker, start_embedded=False)
    deadline = time.monotonic() + timeout
    reports: list[dict[str, Any]] = []
    sender = CallSender(broker, ledger, settings)
    try:
        for worker_id, queue in targets:
            began = time.monotonic()
            report: dict[str, Any] = {"worker": worker_id, "ok": False}
            try:
                answer = sender.ask(
                    PING_TASK, [], max(0.0, deadline - time.monotonic()), queue=queue
                )
            except SbxError as exc:  # the broker or ledger is unreachable from here
                report["error"] = str(exc)
            else:
                if answer is None:
                    report["error"] = f"no answer within {timeout:g} s"
                else:
                    report.update(_answer_fields(answer), ok=True)
                    report["seconds"] = round(time.monotonic() - began, 4)
            reports.append(report)
    finally:
        sender.close()
    return reports


def _answer_fields(answer: str) -> dict[str, Any]:
    try:
        value = json.loads(answer)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: value[k] for k in ("running", "max_running", "concurrency") if k in value}


def _targets(settings: Settings, worker: str | None) -> list[tuple[str, str]]:
    from worker.service.health import health_queue_name, local_workers

    if worker is None:
        return [(r.worker_id, r.health_queue) for r in local_workers(settings.home)]
    host, sep, pid = worker.rpartition(":")
    if not sep or not host or not pid.isdigit():
        fail(f"--worker takes a worker id host:pid, not {worker!r}", EXIT_USAGE)
    return [(worker, health_queue_name(settings.queue, host, int(pid)))]


def cmd_health(args: argparse.Namespace) -> int:
    settings = get_settings()
    timeout = args.timeout if args.timeout is not None else settings.health_timeout
    if timeout <= 0:
        fail("--timeout must be more than 0 seconds", EXIT_USAGE)
    targets = _targets(settings, args.worker)
    if not targets:
        message = f"no sbx worker runs on this machine with SBX_HOME={settings.home}"
        emit({"ok": False, "workers": [], "error": message}, as_json=args.json, human=None)
        fail(message, EXIT_FAILURE)
    reports = probe_workers(settings, targets, timeout)
    healthy = all(r["ok"] for r in reports)
    lines = [
        f"ok: {r['worker']} answered in {r['seconds'] * 1000:.0f} ms "
        f"({r.get('running', '?')} calls running, at most {r.get('max_running', '?')})"
        if r["ok"] else f"unhealthy: {r['worker']}: {r['error']}"
        for r in reports
    ]  # fmt: skip
    emit({"ok": healthy, "workers": reports}, as_json=args.json, human="\n".join(lines))
    return EXIT_OK if healthy else EXIT_FAILURE


def add_health_command(sub: Any) -> None:
    """Register ``sbx health`` on ``sub`` (an argparse sub-parser action)."""
    p = sub.add_parser("health", help="exit 0 only when this machine's worker answers")
    p.add_argument("--worker", help="worker id host:pid (default: every worker of this SBX_HOME "
                   "on this machine)")  # fmt: skip
    p.add_argument("--timeout", type=float, help="seconds to wait (default SBX_HEALTH_TIMEOUT)")
    p.add_argument("--json", action="store_true", help="machine output: one JSON document")
    p.set_defaults(func=cmd_health)
