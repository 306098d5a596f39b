"""The worker runtime: the long-lived collaborators of one worker process, built once."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import redis

from environments.pool import SandboxPool
from process_registry.sessions import SessionSigner
from registry.approval import ApprovalGuard
from worker.broker.connection import redis_client, resolve_broker_url, resolve_ledger_url
from worker.identity import load_signer, sealer
from worker.protocol.ledger import CallLedger
from worker.service.backends import BackendConfigs
from worker.service.grants import GRANTS_PURPOSE, SealedGrants
from worker.service.heartbeat import Heartbeat
from worker.settings import Settings, get_settings

log = logging.getLogger(__name__)


def worker_identity() -> str:
    """``host:pid`` of this process: who claims calls and owns sandboxes."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class WorkerRuntime:
    """What tasks need: settings, identity, the call ledger and the sandbox pool."""

    settings: Settings
    broker_url: str
    """Where Celery messages go (Redis or AMQP)."""
    signer: SessionSigner
    ledger: CallLedger
    pool: SandboxPool
    ledger_url: str = ""
    """The Redis holding sbx's state (``ledger`` is its client; ``worker.broker.connection``)."""
    worker_id: str = field(default_factory=worker_identity)
    components: dict[str, Any] = field(default_factory=dict)
    """Optional tool services by name (``approval``, ``processes``)."""
    _heartbeat: Heartbeat | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def heartbeat(self) -> Heartbeat:
        """The heartbeat thread, started on first use."""
        with self._lock:
            if self._heartbeat is None:
                self._heartbeat = Heartbeat(
                    self.ledger, self.worker_id, self.settings.heartbeat_interval
                )
                self._heartbeat.start()
            return self._heartbeat

    def close(self) -> None:
        """Stop background threads and close every sandbox."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat.join(timeout=5)
        self.pool.close_all()
        with contextlib.suppress(Exception):
            self.ledger.client.close()


def build_runtime(settings: Settings, broker_url: str | None = None) -> WorkerRuntime:
    """The runtime for ``settings`` (tests build their own; workers use :func:`runtime`)."""
    url = broker_url or resolve_broker_url(settings)
    ledger_url = resolve_ledger_url(settings, url)
    client = redis_client(ledger_url)
    svc = WorkerRuntime(
        settings=settings,
        broker_url=url,
        ledger_url=ledger_url,
        signer=load_signer(settings),
        ledger=CallLedger(client, claim_ttl=settings.claim_ttl, lost_after=settings.lost_after),
        pool=SandboxPool(configs=BackendConfigs(settings), idle_ttl=settings.sandbox_idle_ttl),
    )
    svc.components["approval"] = build_approval_guard(settings, client, svc.signer)
    return svc


def build_approval_guard(
    settings: Settings, client: redis.Redis, signer: SessionSigner | None = None
) -> ApprovalGuard:
    """The worker's approval guard: config from ``$SBX_HOME/config.yaml``, state in Redis.

    Approvals live in the ledger's Redis so that every worker serving a session
    sees the same pending approvals and grants; with ``signer``, a grant counts
    only with a worker's seal (``worker.service.grants``).
    """
    from registry.approval.redis_store import RedisApprovalStore

    store: Any = RedisApprovalStore(client)
    if signer is not None:
        store = SealedGrants(store, client, sealer(signer, GRANTS_PURPOSE))
    return ApprovalGuard.from_config_file(
        settings.home / "config.yaml", store=store, mode=settings.approval_mode
    )


_current: WorkerRuntime | None = None
_current_lock = threading.Lock()


def configure_runtime(settings: Settings, broker_url: str | None = None) -> WorkerRuntime:
    """Build this process's runtime from ``settings`` (once; later calls return it)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = build_runtime(settings, broker_url)
        return _current


def runtime() -> WorkerRuntime:
    """This worker process's runtime (from the process settings unless configured)."""
    return _current if _current is not None else configure_runtime(get_settings())
