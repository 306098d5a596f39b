"""ApprovalGuard under failure and concurrency: a broken store, racing checks and
approvals, and stores shared by several workers (memory and a real Redis)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from registry.approval import (
    ApprovalAlreadyResolvedError,
    ApprovalConfigSource,
    ApprovalGuard,
    MemoryApprovalStore,
)
from registry.approval.redis_store import RedisApprovalStore

DANGEROUS = "rm -rf src"


# -- failure handling and concurrency ------------------------------------------------------
class _BrokenStore(MemoryApprovalStore):
    def session_keys(self, session_id: str) -> frozenset[str]:
        raise ConnectionError("store down")


def test_store_failure_fails_closed(config_path: Path, clock: Any) -> None:
    guard = ApprovalGuard(
        store=_BrokenStore(), config=ApprovalConfigSource(config_path), clock=clock
    )
    assert guard.check("ls", session_id="s1", backend="local").outcome == "allow"
    decision = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert decision.outcome == "blocked" and decision.pattern_key == "recursive_delete"


def test_concurrent_checks_produce_one_approval(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    # Two guards over the same backing store model two workers.
    guards = [guard_factory(), guard_factory()]
    barrier = threading.Barrier(16)
    ids: list[str | None] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        barrier.wait()
        decision = guards[i % 2].check("docker compose down -v", session_id="s1", backend="local")
        with lock:
            ids.append(decision.approval_id)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 16 and None not in ids
    assert len(set(ids)) == 1


def test_once_grant_is_consumed_by_exactly_one_concurrent_run(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guards = [guard_factory(), guard_factory()]
    pending = guards[0].check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    guards[1].approve(pending.approval_id, "once", session_id="s1")
    barrier = threading.Barrier(12)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        barrier.wait()
        decision = guards[i % 2].check(DANGEROUS, session_id="s1", backend="local")
        with lock:
            outcomes.append(decision.outcome)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("allow") == 1
    assert outcomes.count("approval_required") == 11


def test_concurrent_approve_resolves_once(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    barrier = threading.Barrier(8)
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        try:
            assert pending.approval_id is not None
            guard.approve(pending.approval_id, "once", session_id="s1")
            result = "ok"
        except ApprovalAlreadyResolvedError:
            result = "already"
        with lock:
            results.append(result)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1 and results.count("already") == 7


def test_from_config_file_with_redis_shares_approvals(
    redis_client: Any, config_path: Path, clock: Any
) -> None:
    worker_a = ApprovalGuard.from_config_file(config_path, redis_client=redis_client, clock=clock)
    worker_b = ApprovalGuard.from_config_file(config_path, redis_client=redis_client, clock=clock)
    assert isinstance(worker_a.store, RedisApprovalStore)
    pending = worker_a.check(DANGEROUS, session_id="s1", backend="docker")
    assert (
        worker_b.check(DANGEROUS, session_id="s1", backend="docker").approval_id
        == pending.approval_id
    )
    assert pending.approval_id is not None
    worker_b.approve(pending.approval_id, "once", session_id="s1")
    assert worker_a.check(DANGEROUS, session_id="s1", backend="docker").outcome == "allow"


def test_from_config_file_without_redis_is_in_memory() -> None:
    guard = ApprovalGuard.from_config_file(None)
    assert isinstance(guard.store, MemoryApprovalStore)
    assert guard.check(DANGEROUS, session_id="s", backend="local").outcome == "approval_required"
