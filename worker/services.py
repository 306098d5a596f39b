"""The long-lived collaborators of one worker process, built once on first use."""

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
from process_registry.sessions import SessionSigner, load_or_create_secret
from registry.approval import ApprovalGuard

from .connection import redis_client, resolve_broker_url, resolve_ledger_url
from .liveness import CallLedger, Heartbeat
from .settings import Settings, get_settings

log = logging.getLogger(__name__)


def worker_identity() -> str:
    """``host:pid`` of this process: who claims calls and owns sandboxes."""
    return f"{socket.gethostname()}:{os.getpid()}"


def load_signer(settings: Settings) -> SessionSigner:
    """The signer for this deployment's secret (``SBX_SECRET_KEY`` or the generated file)."""
    if settings.secret_key is not None:
        return SessionSigner(settings.secret_key.get_secret_value().encode())
    return SessionSigner(load_or_create_secret(settings.secret_path))


@dataclass
class Services:
    """What tasks need: settings, identity, the call ledger and the sandbox pool."""

    settings: Settings
    broker_url: str
    """Where Celery messages go (Redis or AMQP)."""
    signer: SessionSigner
    ledger: CallLedger
    pool: SandboxPool
    ledger_url: str = ""
    """The Redis holding sbx's state (``ledger`` is a client of it); see ``worker.connection``."""
    worker_id: str = field(default_factory=worker_identity)
    extras: dict[str, Any] = field(default_factory=dict)
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


def build_services(settings: Settings, broker_url: str | None = None) -> Services:
    """Services for ``settings`` (tests build their own; workers use :func:`services`)."""
    url = broker_url or resolve_broker_url(settings)
    ledger_url = resolve_ledger_url(settings, url)
    client = redis_client(ledger_url)
    svc = Services(
        settings=settings,
        broker_url=url,
        ledger_url=ledger_url,
        signer=load_signer(settings),
        ledger=CallLedger(client, claim_ttl=settings.claim_ttl, lost_after=settings.lost_after),
        pool=SandboxPool(idle_ttl=settings.sandbox_idle_ttl),
    )
    svc.extras["approval"] = build_approval_guard(settings, client)
    return svc


def build_approval_guard(settings: Settings, client: redis.Redis) -> ApprovalGuard:
    """The worker's approval guard: config from ``$SBX_HOME/config.yaml``, state in Redis.

    Approvals live in the ledger's Redis so that every worker serving a session
    sees the same pending approvals and grants.
    """
    return ApprovalGuard.from_config_file(
        settings.home / "config.yaml", redis_client=client, mode=settings.approval_mode
    )


_current: Services | None = None
_current_lock = threading.Lock()


def configure_services(settings: Settings, broker_url: str | None = None) -> Services:
    """Build this process's services from ``settings`` (once; later calls return them)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = build_services(settings, broker_url)
        return _current


def services() -> Services:
    """This worker process's services (from the process settings unless configured)."""
    return _current if _current is not None else configure_services(get_settings())
