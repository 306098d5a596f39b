"""What the auditor is told about damaged receipts: a file that is no receipt at all (a
precise error naming it, the file not quoted), a forged receipt (left out of listings,
reported by ``verify``) and a chain cut at its end (every missing receipt named)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from process_registry.models import Receipt as StoredReceipt
from tests.fixtures_workers import sbx, settings_for
from worker.client import SandboxClient

PLANTED = "planted-text-not-for-the-reader"


def test_a_garbage_receipt_is_reported_precisely(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    with SandboxClient(session_id="garbled", settings=settings_for(sbx_home, None)) as c:
        pid = c.start("echo hi").process_id
        c.wait(pid, timeout=60)
        env = {"SBX_SESSION_ID": "garbled", "SBX_SESSION_TOKEN": c.session_token}
    path = sbx_home / "logs" / "process-results" / f"{pid}.json"
    path.write_text(json.dumps({"process_id": pid, "output": PLANTED}))
    shown = sbx(sbx_home, "receipts", "show", pid, **env)
    said = shown.stdout + shown.stderr
    assert shown.returncode == 1 and f"receipt of {pid} is unreadable" in said, said
    assert PLANTED not in said and "ValidationError" not in said
    verified = sbx(sbx_home, "receipts", "verify", "--json", **env)
    assert verified.returncode == 1
    assert json.loads(verified.stdout)["ok"] is False


def test_a_listing_shows_no_forged_receipt(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    with SandboxClient(session_id="lister", settings=settings_for(sbx_home, None)) as c:
        pid = c.start("echo real; exit 3").process_id
        c.wait(pid, timeout=60)
        genuine = StoredReceipt.model_validate(c.receipt(pid).model_dump())
        # Planted under its own name, hash recomputed, no key: the seal cannot be made.
        forged = genuine.model_copy(update={"process_id": "pforged", "exit_code": 0,
                                            "output": "all tests passed\n"})  # fmt: skip
        forged = forged.sealed(genuine.seq, genuine.prev_sha256).model_copy(update={"mac": ""})
        (sbx_home / "logs" / "process-results" / "pforged.json").write_text(
            forged.model_dump_json()
        )
        env = {"SBX_SESSION_ID": "lister", "SBX_SESSION_TOKEN": c.session_token}
        listed = sbx(sbx_home, "receipts", "list", "--json", **env)
        assert [r["process_id"] for r in json.loads(listed.stdout)] == [pid]
        assert any("pforged" in p for p in c.verify_receipts())


def test_a_chain_cut_at_its_end_names_every_missing_receipt(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    with SandboxClient(session_id="cut", settings=settings_for(sbx_home, None)) as c:
        ids = [c.start(f"echo {i}").process_id for i in range(5)]
        for pid in ids:
            c.wait(pid, timeout=60)
        for pid in ids[2:]:
            (sbx_home / "logs" / "process-results" / f"{pid}.json").unlink()
        problems = c.verify_receipts()
    assert problems == [
        "cut: receipts #3..#4 are missing (deleted)",
        "cut: latest receipt #5 is missing (deleted)",
    ], problems
