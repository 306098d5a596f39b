"""Running a worker process: the app, its tasks, its background threads."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

from environments.dispositions import pass_on_default_dispositions
from registry.approval import ApprovalGuard
from registry.plugins import load_plugins_once
from worker.broker import message_log
from worker.broker.app import create_app, worker_queue
from worker.broker.connection import display_url, resolve_broker_url
from worker.broker.urls import is_amqp_url
from worker.protocol.tasks import own_queue_name
from worker.service import approval_policy
from worker.service.log_format import install_log_format
from worker.service.mcp_reload import watch_mcp_config
from worker.service.operations import install_operations
from worker.service.process_wiring import (
    adopt_processes,
    close_process_manager,
    install_process_manager,
)
from worker.service.processes import ProcessManager
from worker.service.reaper import Reaper
from worker.service.receipt_ops import register_receipt_tasks
from worker.service.runtime import WorkerRuntime, configure_runtime, runtime
from worker.service.stranded_calls import stranded_requeuer
from worker.service.tasks import register_tasks
from worker.settings import Settings

log = logging.getLogger(__name__)


def _tick() -> None:
    """A timer entry that only wakes the worker's event loop (see ``run_worker``)."""


def _release_idle(svc: WorkerRuntime) -> None:
    """Give up the leases of the sessions with no call in flight in ``svc`` (stopping)."""
    if svc.leases is None or svc.dispatcher is None:
        return
    try:
        svc.leases.release_idle(svc.dispatcher.sessions())
    except Exception:
        log.warning("could not give up the leases of idle sessions", exc_info=True)


def worker_app(settings: Settings, broker_url: str | None = None) -> Celery:
    """The worker's Celery app with sbx's tasks registered."""
    app = create_app(broker_url or resolve_broker_url(settings), settings)
    register_tasks(app)
    register_receipt_tasks(app)
    return app


def run_worker(
    settings: Settings,
    *,
    broker_url: str | None = None,
    queues: list[str] | None = None,
    concurrency: int | None = None,
    loglevel: str = "INFO",
    events: bool = False,
) -> None:
    """Run a worker in this process until it is told to stop (SIGTERM: warm shutdown).

    Raises ``SystemExit`` with Celery's non-zero status when the worker stopped on
    an error (Celery logs it as "Unrecoverable error"); returns after a clean stop.

    ``events``: send Celery task events (also ``SBX_EVENTS``)."""
    install_log_format(settings, loglevel)
    # Before any sandbox starts: none may inherit what the worker's launcher ignored.
    passed = pass_on_default_dispositions()
    if passed:
        log.info("signals ignored by the worker's launcher stay at their defaults in "
                 "sandboxes: %s", ", ".join(passed))  # fmt: skip
    url = broker_url or resolve_broker_url(settings)
    app = worker_app(settings, url)
    # Each worker also consumes its own queue: actions on its local processes go there.
    own_queue = own_queue_name(settings.queue)
    if is_amqp_url(url):
        # Declared by this worker alone, durable and expiring (worker.app.worker_queue).
        app.amqp.queues.add(worker_queue(own_queue))
    svc = configure_runtime(settings, url)
    install_process_manager(svc, settings, own_queue)
    threads = concurrency or settings.concurrency
    ops = install_operations(app, settings, svc, url, concurrency=threads, events=events)
    # Tool plugins (entry points), with the operator's opt-ins; their hooks run in dispatch.
    svc.components["repair"] = load_plugins_once(settings.plugins).repair
    reaper: list[Reaper] = []
    # before consuming: persisted MCP tools are callable from the first task; never blocks
    guard = svc.components.get("approval")
    reload_policy = (
        functools.partial(approval_policy.reload, svc.ledger.client, guard)
        if isinstance(guard, ApprovalGuard)
        else None
    )
    # follows config.yaml's MCP servers; SIGHUP also reloads the approval policy
    mcp = watch_mcp_config(settings, on_signal=reload_policy)

    def _ready(sender: Any = None, **_: Any) -> None:
        hub = getattr(sender, "hub", None)  # sender: the consumer
        if hub is not None:
            # Celery notices a warm shutdown (SIGTERM) only between two polls of its event
            # loop, which sleeps up to 10 s while the broker is quiet (AMQP; Redis wakes it
            # every second): a tick bounds that to 1 s. Kept across reconnects.
            hub.call_repeatedly(0.02, _tick)
        svc = runtime()
        svc.heartbeat.tick()  # this worker is present from now on (the thread renews it)
        adopt_processes(svc)
        manager = svc.components.get("processes")
        r = Reaper(
            svc.ledger,
            settings.lost_after,
            svc.pool,
            orphan_max_idle=settings.orphan_max_idle,
            orphan_sweep_interval=settings.orphan_sweep_interval,
            leases=svc.leases,
            adopt=manager.adopt_absent if isinstance(manager, ProcessManager) else None,
            take_over=(
                functools.partial(svc.leases.take_over, pool=svc.pool) if svc.leases else None
            ),
            requeue=stranded_requeuer(svc, url),
        )
        r.start()
        reaper.append(r)
        log.info(
            "sbx worker %s ready on %s (broker %s, ledger %s)",
            svc.worker_id,
            ",".join(queues or [settings.queue]),
            display_url(svc.broker_url),
            display_url(svc.ledger_url),
        )

    def _shutting_down(**_: Any) -> None:
        # SIGTERM: Celery takes no new calls and waits for the running ones; after the
        # grace, they are cancelled (their trees killed, each answered "cancelled").
        svc = runtime()
        timer = threading.Timer(settings.shutdown_grace, svc.heartbeat.cancel_all)
        timer.daemon = True
        timer.start()
        if svc.leases is not None and svc.dispatcher is not None:
            # This worker takes no call any more: a session with none running here is
            # given up now (its calls move at once instead of queueing, unserved, on this
            # worker's own queue until the grace is over); the others when they finish.
            svc.dispatcher.on_idle = svc.leases.release
            # One round trip per session: off the signal handler, which Celery waits on.
            threading.Thread(
                target=_release_idle, args=(svc,), name="sbx-release", daemon=True
            ).start()

    exit_status: list[int] = []

    def _shutdown(sender: Any = None, **_: Any) -> None:
        # sender: Celery's WorkController, whose exitcode says why it stopped (1: an error).
        code = getattr(sender, "exitcode", None)
        exit_status.append(code if isinstance(code, int) else 0)
        ops.close()
        if mcp is not None:
            mcp.close()  # stops the MCP server processes
        for r in reaper:
            r.stop()
        svc = runtime()
        if svc.dispatcher is not None:
            # Celery closed the broker consumer before this signal: no call comes in now.
            log.info("sbx worker %s takes no more calls; %d still running", svc.worker_id,
                     svc.dispatcher.in_flight())  # fmt: skip
            # Calls taken in still run on the dispatcher: their grace is the rest of it,
            # then they are cancelled (the grace timer) and answered.
            svc.dispatcher.drain(settings.shutdown_grace + 30.0)
            svc.dispatcher.close()
        close_process_manager(svc)  # background processes live on, for their adopter
        if svc.leases is not None:
            with contextlib.suppress(Exception):
                svc.leases.withdraw()  # the next call of each session moves it
        svc.close(keep_sandboxes=True)

    # Celery logs each task's return value at INFO; results are tool output, kept out of logs.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
    message_log.install()  # and a discarded message's content too
    worker_ready.connect(_ready, weak=False)
    worker_shutdown.connect(_shutdown, weak=False)
    worker_shutting_down.connect(_shutting_down, weak=False)
    argv = [
        "worker",
        "--pool=threads",
        f"--concurrency={threads}",
        f"--queues={','.join([*(queues or [settings.queue]), own_queue])}",
        f"--hostname=sbx-{socket.gethostname()}-%i@%h",
        "--without-gossip",
        "--without-mingle",
        *ops.worker_options,
        f"--loglevel={loglevel}",
    ]
    try:
        app.worker_main(argv=argv)
    finally:
        if mcp is not None:
            mcp.close()  # idempotent; covers an exit that skipped worker_shutdown
    # Celery's worker_main returns nothing, whatever the worker's status; a worker that
    # stopped on an unrecoverable error must not exit 0 (systemd's Restart=on-failure,
    # a container's restart policy would leave it stopped).
    if exit_status and exit_status[-1]:
        log.critical("sbx worker stopped on an error (exit status %s)", exit_status[-1])
        raise SystemExit(exit_status[-1])
