"""Sealed receipts: verify catches a forger who recomputes every plain hash, a deleted
or rolled chain head, and a planted symlink reads as no receipt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from process_registry.models import IntegrityError, NotFound, Receipt
from process_registry.receipt_chains import chain_file
from process_registry.receipts import ReceiptStore
from process_registry.tokens.keyring import Keyring
from process_registry.tokens.sealer import Sealer
from tests.unit.process_registry.test_receipts import draft


@pytest.fixture
def store(home: Path) -> ReceiptStore:
    sealer = Sealer(Keyring.of(b"k" * 32), "receipts")
    return ReceiptStore(home, sealer=sealer, clock=lambda: 1_000_000.0)


def _path(home: Path, pid: str) -> Path:
    return home / "logs" / "process-results" / f"{pid}.json"


def _chain(home: Path, session: str = "alice") -> Path:
    return home / "logs" / "process-chains" / chain_file(session)


def _rehash_all(home: Path, receipts: list[Receipt], edit: dict[str, object]) -> None:
    """Edit the first receipt and recompute every plain hash after it, and the chain head."""
    prev: str | None = None
    for i, r in enumerate(receipts):
        changed = r.model_copy(update=edit) if i == 0 else r
        sealed = changed.sealed(r.seq, prev).model_copy(update={"mac": r.mac})
        _path(home, r.process_id).write_text(sealed.model_dump_json())
        prev = sealed.sha256
    head = json.loads(_chain(home).read_text())
    head["head_sha"] = prev
    _chain(home).write_text(json.dumps(head))


def test_sealed_chain_verifies_clean(store: ReceiptStore) -> None:
    for i in range(3):
        store.write(draft(f"p{i}"))
    assert store.verify(["alice"]) == []
    assert store.read("p1", "alice").mac


def test_edit_with_every_hash_recomputed_is_caught(home: Path, store: ReceiptStore) -> None:
    receipts = [store.write(draft(f"p{i}")) for i in range(3)]
    _rehash_all(home, receipts, {"output": "forged\n", "exit_code": 0})
    problems = store.verify(["alice"])
    assert any("p0: its seal does not match" in p for p in problems), problems
    assert any("chain head's seal does not match" in p for p in problems), problems
    with pytest.raises(IntegrityError):
        store.read("p0", "alice")
    # The same forgery against an unsealed store goes unnoticed: that is what seals add.
    plain = ReceiptStore(home, clock=lambda: 1_000_000.0)
    assert plain.verify(["alice"]) == []


def test_a_stripped_seal_is_caught(home: Path, store: ReceiptStore) -> None:
    store.write(draft("p0"))
    data = json.loads(_path(home, "p0").read_text())
    data["mac"] = ""
    _path(home, "p0").write_text(json.dumps(data))
    assert any("carries no seal" in p for p in store.verify(["alice"]))


def test_a_deleted_chain_head_is_caught(home: Path, store: ReceiptStore) -> None:
    for i in range(2):
        store.write(draft(f"p{i}"))
    _chain(home).unlink()
    assert any("chain head is missing" in p for p in store.verify(["alice"]))


def test_a_forged_head_stays_reported_after_later_writes(home: Path, store: ReceiptStore) -> None:
    for i in range(3):
        store.write(draft(f"p{i}"))
    # Delete the latest receipt and roll the head back by hand (no key: no valid seal).
    _path(home, "p2").unlink()
    head = json.loads(_chain(home).read_text())
    first = Receipt.model_validate_json(_path(home, "p1").read_text())
    head.update(head_seq=first.seq, head_sha=first.sha256)
    _chain(home).write_text(json.dumps(head))
    store.write(draft("p3"))  # the writer re-seals the head: the evidence must survive it
    problems = store.verify(["alice"])
    assert any("changed outside sbx" in p for p in problems), problems


def test_reorder_with_rehash_is_caught(home: Path, store: ReceiptStore) -> None:
    rs = [store.write(draft(f"p{i}")) for i in range(3)]
    first = rs[1].sealed(1, None).model_copy(update={"mac": rs[1].mac})
    second = rs[0].sealed(2, first.sha256).model_copy(update={"mac": rs[0].mac})
    _path(home, "p1").write_text(first.model_dump_json())
    _path(home, "p0").write_text(second.model_dump_json())
    assert any("seal does not match" in p for p in store.verify(["alice"]))


def test_a_planted_symlink_is_not_found_and_names_no_path(home: Path, store: ReceiptStore) -> None:
    outside = home / "elsewhere.json"
    outside.write_text("{}")
    _path(home, "pplanted").symlink_to(outside)
    with pytest.raises(NotFound) as caught:
        store.read("pplanted", "alice")
    assert str(home) not in str(caught.value)
