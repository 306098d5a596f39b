"""ReceiptStore: one receipt per process, redaction, bounds, retention, verify, access."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from process_registry.continuations import ContinuationStore
from process_registry.models import (
    AlreadyExists,
    IntegrityError,
    InvalidId,
    NotFound,
    PermissionDenied,
    Receipt,
)
from process_registry.receipts import ReceiptStore
from tests.unit.process_registry.secrets import GITHUB, OPENAI, PASSWORD


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def draft(
    process_id: str, session: str = "alice", ended: float = 1_000_000.0, **kw: object
) -> Receipt:
    fields: dict[str, object] = {
        "process_id": process_id,
        "owner_session_id": session,
        "command": "echo hi",
        "backend": "local",
        "sandbox_id": "local:test",
        "cwd": "/tmp",
        "started_at": ended - 1,
        "ended_at": ended,
        "exit_code": 0,
        "status": "exited",
        "output": "hi\n",
        "output_truncated": False,
        "output_bytes": 3,
    }
    fields.update(kw)
    return Receipt.model_validate(fields)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(home: Path, clock: Clock) -> ReceiptStore:
    return ReceiptStore(home, clock=clock)


def test_fields_modes_and_location(store: ReceiptStore, home: Path) -> None:
    r = store.write(draft("p1"))
    path = home / "logs" / "process-results" / "p1.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    data = json.loads(path.read_text())
    for key in [
        "process_id",
        "owner_session_id",
        "command",
        "backend",
        "sandbox_id",
        "cwd",
        "started_at",
        "ended_at",
        "exit_code",
        "status",
        "output",
        "output_truncated",
        "output_bytes",
        "prev_sha256",
        "sha256",
    ]:
        assert key in data
    assert data["sha256"] == r.sha256 == r.compute_sha256()
    assert r.seq == 1 and r.prev_sha256 is None
    r2 = store.write(draft("p2"))
    assert (r2.seq, r2.prev_sha256) == (2, r.sha256)


def test_exactly_one_receipt_per_process_even_when_racing(store: ReceiptStore) -> None:
    winners: list[str] = []
    losers: list[str] = []
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        try:
            store.write(draft("race", output=f"writer {i}"))
            winners.append(str(i))
        except AlreadyExists:
            losers.append(str(i))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(losers) == 7
    assert store.verify(["alice"]) == []


def test_redaction_is_forced_and_output_bounded(home: Path) -> None:
    store = ReceiptStore(home, output_cap=1024, clock=Clock())
    out = f"token {GITHUB}\n" + "x" * 5000 + f"\nkey {OPENAI}\n"
    r = store.write(draft("p1", command=f"curl -u password={PASSWORD}", output=out))
    raw = (home / "logs" / "process-results" / "p1.json").read_text()
    for secret in (GITHUB, OPENAI, PASSWORD):
        assert secret not in raw
    assert r.output_truncated and "bytes omitted" in r.output
    assert len(r.output.encode()) < 1200


def test_ids_are_validated(store: ReceiptStore) -> None:
    with pytest.raises(InvalidId):
        store.write(draft("../evil"))
    with pytest.raises(InvalidId):
        store.read("../../etc/passwd", "alice")


def test_owner_and_continuation_read_others_denied(home: Path, store: ReceiptStore) -> None:
    store.write(draft("p1", session="parent"))
    conts = ContinuationStore(home)
    conts.record("parent", "child")
    conts.record("child", "grandchild")
    assert store.read("p1", "parent").process_id == "p1"
    assert store.read("p1", "child").process_id == "p1"
    assert store.read("p1", "grandchild").process_id == "p1"
    for other in ("stranger", "delegate-of-parent"):
        with pytest.raises(PermissionDenied):
            store.read("p1", other)
        assert store.list(other) == []
    assert [r.process_id for r in store.list("child")] == ["p1"]
    with pytest.raises(NotFound):
        store.read("nope", "parent")


def test_continuations_cannot_loop_or_be_reparented(home: Path) -> None:
    conts = ContinuationStore(home)
    conts.record("a", "b")
    conts.record("a", "b")  # idempotent
    with pytest.raises(InvalidId):
        conts.record("b", "a")
    with pytest.raises(AlreadyExists):
        conts.record("c", "b")
    assert not conts.may_read("a", "b")  # a parent may not read its continuation's receipts


def test_retention_by_age(store: ReceiptStore, clock: Clock) -> None:
    store.write(draft("old", ended=clock.now - 8 * 86400))
    store.write(draft("recent", ended=clock.now - 86400))
    assert [r.process_id for r in store.list("alice")] == ["recent"]  # pruned on write
    clock.now += 6.5 * 86400
    assert store.prune() == 1
    assert store.list("alice") == []
    assert store.verify(["alice"]) == []  # retention is not tampering


def test_retention_by_count_keeps_newest_completions(home: Path, clock: Clock) -> None:
    store = ReceiptStore(home, clock=clock, max_count=3)
    for i, ended in enumerate([5, 1, 4, 2, 3]):
        store.write(draft(f"p{i}", ended=clock.now - 100 + ended))
    kept = sorted(r.process_id for r in store.list("alice"))
    assert kept == ["p0", "p2", "p4"]  # completion times 5, 4, 3
    assert store.verify(["alice"]) == []


def _path(home: Path, pid: str) -> Path:
    return home / "logs" / "process-results" / f"{pid}.json"


def test_verify_detects_edit(home: Path, store: ReceiptStore) -> None:
    for i in range(3):
        store.write(draft(f"p{i}"))
    data = json.loads(_path(home, "p1").read_text())
    data["exit_code"] = 0 if data["exit_code"] else 1
    _path(home, "p1").write_text(json.dumps(data))
    assert any("edited" in p for p in store.verify(["alice"]))
    with pytest.raises(IntegrityError):
        store.read("p1", "alice")


@pytest.mark.parametrize("victim", ["p1", "p2"])
def test_verify_detects_deletion(home: Path, store: ReceiptStore, victim: str) -> None:
    for i in range(3):
        store.write(draft(f"p{i}"))
    _path(home, victim).unlink()
    assert any("deleted" in p for p in store.verify(["alice"]))


def test_verify_detects_swapped_files(home: Path, store: ReceiptStore) -> None:
    for i in range(3):
        store.write(draft(f"p{i}"))
    a, b = _path(home, "p0").read_bytes(), _path(home, "p1").read_bytes()
    _path(home, "p0").write_bytes(b)
    _path(home, "p1").write_bytes(a)
    assert store.verify(["alice"])


def test_verify_detects_reorder_even_with_rehashed_receipts(
    home: Path, store: ReceiptStore
) -> None:
    rs = [store.write(draft(f"p{i}")) for i in range(3)]
    # Swap positions 1 and 2, recomputing every hash as a careful forger would.
    first = rs[1].sealed(1, None)
    second = rs[0].sealed(2, first.sha256)
    _path(home, "p1").write_text(first.model_dump_json())
    _path(home, "p0").write_text(second.model_dump_json())
    problems = store.verify(["alice"])
    assert any("reordered" in p for p in problems), problems


def test_verify_clean_chain_per_session(store: ReceiptStore) -> None:
    for i in range(4):
        store.write(draft(f"p{i}", session="alice" if i % 2 else "bob"))
    assert store.verify(["alice", "bob"]) == []
