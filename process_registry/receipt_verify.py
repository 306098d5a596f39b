"""``receipts verify``: what is wrong with a set of sessions' receipts.

What a clean report proves (docs/processes.md, "What verify proves"): with a
sealing store, every receipt present and every chain head was written by a
holder of the keyring (a worker or the operator), unchanged since; no receipt
between a session's first retained one and its chain head was deleted,
reordered or moved; the chain head itself was neither deleted (while
receipts of its session remain) nor changed. Recomputing plain hashes does
not help an attacker: seals need a key no sandbox reads. Without a sealer
only the hash chain is checked, which anyone able to write the files can
recompute.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .models import Receipt
from .receipt_chains import RECEIPT_PURPOSE

if TYPE_CHECKING:
    from .receipts import ReceiptStore

_SEAL_PROBLEM = {
    "bad": "its seal does not match: changed outside sbx (edited)",
    "missing": "it carries no seal (written without a key, or its seal was removed)",
    "unknown_key": "it was sealed with a key removed since: it cannot be checked",
}


def receipt_problems(store: ReceiptStore, name: str, r: Receipt) -> list[str]:
    """What is wrong with one receipt on its own (file name, hash, seal)."""
    problems = []
    if name != r.process_id:
        problems.append(f"{name}: file holds the receipt of {r.process_id} (moved)")
    if not r.is_intact():
        problems.append(f"{r.process_id}: content does not match its sha256 (edited)")
    if store.sealer is not None:
        check = store.sealer.check(r.mac, RECEIPT_PURPOSE, r.sha256)
        if check != "ok":
            problems.append(f"{r.process_id}: {_SEAL_PROBLEM[check]}")
    return problems


def chain_problems(
    session: str, chain: dict[str, Any], seal: str | None, receipts: list[Receipt]
) -> list[str]:
    """What is wrong with one session's chain of ``receipts`` given its head ``chain``."""
    problems: list[str] = []
    if receipts and not chain.get("exists"):
        problems.append(f"{session}: the chain head is missing (deleted)")
    if seal not in (None, "ok"):
        problems.append(f"{session}: the chain head's seal does not match (changed outside sbx)")
    if chain.get("tampered"):
        problems.append(f"{session}: the chain head was changed outside sbx: {chain['tampered']}")
    pruned: dict[str, str] = chain["pruned"]
    by_seq: dict[int, Receipt] = {}
    for r in receipts:
        if r.seq in by_seq:
            problems.append(f"{r.process_id}: duplicate position {r.seq} (reordered)")
        by_seq[r.seq] = r
    for seq, r in sorted(by_seq.items()):
        if seq <= 1:
            if r.prev_sha256 is not None or seq < 1:
                problems.append(f"{r.process_id}: bad chain start (reordered)")
            continue
        pred = by_seq.get(seq - 1)
        expected = pred.sha256 if pred is not None else pruned.get(str(seq - 1))
        if expected is None:
            problems.append(f"{session}: receipt #{seq - 1} is missing (deleted)")
        elif r.prev_sha256 != expected:
            problems.append(f"{r.process_id}: predecessor hash mismatch (reordered)")
    head_seq, head_sha = chain["head_seq"], chain["head_sha"]
    # Receipts after the newest present or pruned one and before the head have no
    # successor to miss them: a truncated chain would name only its last receipt.
    newest = max([*by_seq, *(int(k) for k in pruned if k.isdigit())], default=0)
    if newest + 1 < head_seq:
        if newest + 2 == head_seq:
            problems.append(f"{session}: receipt #{newest + 1} is missing (deleted)")
        else:
            gap = f"#{newest + 1}..#{head_seq - 1}"
            problems.append(f"{session}: receipts {gap} are missing (deleted)")
    if head_seq and head_seq not in by_seq and str(head_seq) not in pruned:
        problems.append(f"{session}: latest receipt #{head_seq} is missing (deleted)")
    elif head_seq in by_seq and by_seq[head_seq].sha256 != head_sha:
        problems.append(f"{session}: latest receipt differs from the chain head")
    if any(seq > head_seq for seq in by_seq):
        problems.append(f"{session}: receipt beyond the chain head (reordered)")
    return problems


def verify_sessions(store: ReceiptStore, session_ids: Iterable[str]) -> list[str]:
    """Integrity problems in the receipts of ``session_ids`` (empty list: all good)."""
    wanted = set(session_ids)
    by_session: dict[str, list[Receipt]] = {s: [] for s in wanted}
    problems: list[str] = []
    for name, r in store.all_receipts():
        if r is not None and r.owner_session_id in wanted:
            problems.extend(receipt_problems(store, name, r))
            by_session[r.owner_session_id].append(r)
    for session in sorted(wanted):
        chain = store.heads.load(session, store.load)
        seal = store.heads.seal_check(chain)
        problems.extend(chain_problems(session, chain, seal, by_session[session]))
    return problems
