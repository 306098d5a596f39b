"""The worker runtime: the long-lived collaborators of one worker process, built once."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import redis

from environments.pool import SandboxPool
from process_registry.redact import redact_text
from process_registry.sessions import SessionSigner
from registry.approval import ApprovalGuard
from registry.tools.file_access import FilePolicy
from worker.broker.connection import redis_client, resolve_broker_url, resolve_ledger_url
from worker.broker.sender import CallSender
from worker.identity import load_signer, sealer
from worker.protocol.leases import LeaseBook
from worker.protocol.ledger import CallLedger, claim_lifetime
from worker.protocol.revocations import MirrorFollower
from worker.protocol.streams import CallStreams
from worker.protocol.tasks import own_queue_name
from worker.service.approval_policy import audit, policy_reader
from worker.service.backends import BackendConfigs
from worker.service.dispatcher import SessionDispatcher
from worker.service.grants import GRANTS_PURPOSE, SealedGrants
from worker.service.heartbeat import Heartbeat
from worker.service.leases import SessionLeases
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
    leases: SessionLeases | None = None
    """The sessions this worker serves (None: a runtime without a fleet, in tests)."""
    dispatcher: SessionDispatcher | None = None
    """Runs taken calls off Celery's threads (None: calls run where they are taken)."""
    _heartbeat: Heartbeat | None = None
    _sender: CallSender | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def heartbeat(self) -> Heartbeat:
        """The heartbeat thread (calls' heartbeats and this worker's presence), started on
        first use."""
        with self._lock:
            if self._heartbeat is None:
                self._heartbeat = Heartbeat(
                    self.ledger,
                    self.worker_id,
                    self.settings.heartbeat_interval,
                    on_tick=self._on_tick,
                )
                self._heartbeat.start()
            return self._heartbeat

    def _on_tick(self) -> None:
        """Every heartbeat: this worker's presence, then the ledger's revocations copied
        into this worker's home (so that an emptied ledger gets them back from any worker).
        Raises what renewing the presence raises; a failed copy is retried next tick."""
        if self.leases is not None:
            self.leases.announce()
        try:
            self._revocations.follow(self.ledger.client)
        except (redis.RedisError, OSError) as exc:
            log.debug("could not copy the ledger's revocations (retrying): %s", exc)

    @functools.cached_property
    def _revocations(self) -> MirrorFollower:
        return MirrorFollower(self.settings.home)

    @functools.cached_property
    def streams(self) -> CallStreams:
        """Calls' streams and staged uploads in the ledger (``worker.protocol.streams``)."""
        return CallStreams(self.ledger.client)

    def sender(self) -> CallSender:
        """A sender on this worker's broker and ledger, for calls it hands to other workers."""
        with self._lock:
            if self._sender is None:
                self._sender = CallSender(self.broker_url, self.ledger_url, self.settings)
            return self._sender

    def close(self, *, keep_sandboxes: bool = False) -> None:
        """Stop background threads and close every sandbox (``keep_sandboxes``: only let
        go of them, for the workers that serve their sessions next)."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat.join(timeout=5)
        if keep_sandboxes:
            self.pool.detach_all()
        else:
            self.pool.close_all()
        with contextlib.suppress(Exception):
            if self._sender is not None:
                self._sender.close()
        with contextlib.suppress(Exception):
            self.ledger.client.close()


def build_runtime(settings: Settings, broker_url: str | None = None) -> WorkerRuntime:
    """The runtime for ``settings`` (tests build their own; workers use :func:`runtime`)."""
    url = broker_url or resolve_broker_url(settings)
    ledger_url = resolve_ledger_url(settings, url)
    client = redis_client(ledger_url)
    worker_id = worker_identity()
    book = LeaseBook(client, presence_ttl=settings.lost_after, retention=settings.lease_retention)
    leases = SessionLeases(book, worker_id, own_queue_name(settings.queue))
    pool = SandboxPool(
        configs=BackendConfigs(settings),
        idle_ttl=settings.sandbox_idle_ttl,
        shell_idle_ttl=settings.shell_idle_ttl,
        served_elsewhere=leases.serves_elsewhere,
    )
    svc = WorkerRuntime(
        settings=settings,
        broker_url=url,
        ledger_url=ledger_url,
        signer=load_signer(settings),
        ledger=CallLedger(
            client,
            claim_ttl=claim_lifetime(settings.claim_ttl),
            lost_after=settings.lost_after,
            result_ttl=settings.result_ttl,
        ),
        pool=pool,
        worker_id=worker_id,
        leases=leases,
        dispatcher=SessionDispatcher(
            max_running=settings.max_running, per_session=settings.session_max_in_flight
        ),
    )

    def released(session_id: str, backend: str) -> None:
        if session_id not in pool.sessions():
            leases.release(session_id)

    pool.on_released = released
    svc.components["approval"] = build_approval_guard(settings, client, svc.signer)
    # The worker's own state is out of reach of file operations on its machine.
    svc.components["files"] = FilePolicy(
        max_bytes=settings.max_file_bytes, protected=(str(settings.home),)
    )
    return svc


def build_approval_guard(
    settings: Settings, client: redis.Redis, signer: SessionSigner | None = None
) -> ApprovalGuard:
    """The worker's approval guard: its policy from the settings (config.yaml), read at
    start and audited against the last one applied; its state in the ledger.

    Approvals live in the ledger's Redis so that every worker serving a session
    sees the same pending approvals and grants; with ``signer``, a grant counts
    only with a worker's seal (``worker.service.grants``).
    """
    from registry.approval.redis_store import RedisApprovalStore

    store: Any = RedisApprovalStore(client)
    if signer is not None:
        store = SealedGrants(store, client, sealer(signer, GRANTS_PURPOSE))
    guard = ApprovalGuard.from_config_file(
        None,
        document=policy_reader(settings),
        store=store,
        mode=settings.approval_mode,
        # The worker guards itself: overwriting its home or config needs approval.
        protected_paths=[str(settings.home), str(settings.home / "config.yaml")],
    )
    # A smart-mode judge is a third party: it is sent the command redacted.
    guard.judge_view = redact_text
    audit(client, guard)
    return guard


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
