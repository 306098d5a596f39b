"""The worker's health probe: its consumer answers through the broker (``sbx health``).

Contract:

* Every worker consumes one more queue of its own, ``<queue>.w.<host>.<pid>.health``
  (:func:`health_queue_name`), in its consumer's event loop, not in the pool of
  call threads: a worker whose threads are all busy with long calls still
  answers, a worker whose event loop is stalled or whose broker connection is
  dead does not. The answer goes to the probe's mailbox in the ledger.
* A probe older than :data:`PROBE_MAX_AGE_S` when it is taken (it waited while the
  worker was stalled) is dropped unanswered: its asker gave up long ago.
* The worker records itself in ``$SBX_HOME/workers/<pid>.json`` (0600, directory
  0700) so that ``sbx health`` on the same machine finds it without being told its
  id; :func:`local_workers` returns the records of workers that are still running.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from celery import Celery, bootsteps
from kombu.messaging import Consumer
from pydantic import BaseModel

from process_registry.atomic import atomic_write, ensure_private_dir
from worker.broker.app import worker_queue
from worker.broker.urls import is_amqp_url
from worker.protocol.ledger import CallLedger
from worker.protocol.tasks import SENT_AT_HEADER, own_queue_name

log = logging.getLogger(__name__)

PROBE_MAX_AGE_S = 60.0


class WorkerRecord(BaseModel):
    """A running worker as ``sbx health`` finds it on its machine."""

    worker_id: str
    pid: int
    health_queue: str
    started: float
    """The process's start time (psutil), so a reused pid is not mistaken for it."""


def health_queue_name(queue: str, host: str | None = None, pid: int | None = None) -> str:
    """The health queue of the worker ``host:pid`` of the shared ``queue`` (default: this one)."""
    return f"{own_queue_name(queue, host, pid)}.health"


def workers_dir(home: Path) -> Path:
    return home / "workers"


def record_worker(home: Path, worker_id: str, health_queue: str) -> Path:
    """Write this process's :class:`WorkerRecord` under ``home``; returns its path."""
    pid = os.getpid()
    record = WorkerRecord(
        worker_id=worker_id,
        pid=pid,
        health_queue=health_queue,
        started=psutil.Process(pid).create_time(),
    )
    directory = ensure_private_dir(workers_dir(home))
    atomic_write(directory, f"{pid}.json", record.model_dump_json().encode())
    return directory / f"{pid}.json"


def forget_worker(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def local_workers(home: Path) -> list[WorkerRecord]:
    """Records under ``home`` of workers whose process still runs (same pid, same start)."""
    found = []
    for path in sorted(workers_dir(home).glob("*.json")):
        try:
            record = WorkerRecord.model_validate_json(path.read_bytes())
            alive = abs(psutil.Process(record.pid).create_time() - record.started) < 1.0
        except (OSError, ValueError, psutil.Error):
            continue
        if alive:
            found.append(record)
    return found


def install_health(
    app: Celery,
    broker_url: str,
    ledger: Callable[[], CallLedger],
    queue: str,
    status: Callable[[], dict[str, Any]],
    on_connect: Callable[[], None] | None = None,
) -> str:
    """Add the health consumer to ``app``'s worker; returns the health queue's name.

    ``ledger()`` is where answers go, ``status()`` what they say besides ``ok``;
    ``on_connect()`` runs each time the consumer (re)connects to the broker.
    """
    name = health_queue_name(queue)
    if is_amqp_url(broker_url):
        # Declared by this worker alone, like its own queue (worker.broker.app.worker_queue).
        app.amqp.queues.add(worker_queue(name))
    answers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sbx-health")

    def answer(probe_id: str) -> None:
        try:
            ledger().deliver(probe_id, json.dumps({"status": "ok", **status()}))
        except Exception as exc:  # the asker times out: unhealthy, as it should be
            log.warning("could not answer a health probe: %s", exc)

    class HealthConsumer(bootsteps.ConsumerStep):  # type: ignore[misc]
        """Consumes the health queue in the consumer's own event loop."""

        name = "sbx.health"

        def get_consumers(self, channel: Any) -> list[Consumer]:
            consumer = Consumer(  # type: ignore[no-untyped-call]
                channel,
                queues=[app.amqp.queues[name]],
                callbacks=[self.on_probe],
                accept=["json"],
                no_ack=True,
            )
            return [consumer]

        def start(self, c: Any) -> None:
            super().start(c)
            if on_connect is not None:
                on_connect()

        def on_probe(self, body: Any, message: Any) -> None:
            headers = getattr(message, "headers", None) or {}
            probe_id, sent = headers.get("id"), headers.get(SENT_AT_HEADER)
            if not isinstance(probe_id, str):
                return
            if isinstance(sent, int | float) and time.time() - float(sent) > PROBE_MAX_AGE_S:
                return  # asked while this worker was stalled; nobody waits for it now
            answers.submit(answer, probe_id)

    app.steps["consumer"].add(HealthConsumer)
    return name
