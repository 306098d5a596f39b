"""Retention must not launder a deletion: attacks on ``process-results`` from inside a real
terminal call through a real worker, then a prune, then ``verify``.

An attacker who can write ``SBX_HOME`` but holds no key can delete a receipt (verify shows
the gap) and can set file times. Retention prunes by mtime and records each pruned hash in
the sealed chain head so the gap it leaves is not a deletion: it must neither retire a
genuine receipt because its mtime was back-dated, nor accept a planted, unsealed stand-in
as the record of a receipt that was deleted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fixtures_attacks import attack, script
from tests.fixtures_workers import settings_for
from worker.client import SandboxClient

BACKDATE = """
import os
from pathlib import Path
try:
    os.utime(Path(ARGS["home"]) / "logs" / "process-results" / f"{ARGS['pid']}.json", (1, 1))
except OSError:
    report(reached=False)
report(reached=True)
"""

STAND_IN = """
import os
from pathlib import Path
from process_registry.models import Receipt
results = Path(ARGS["home"]) / "logs" / "process-results"
hidden = results / f"{ARGS['pid']}.json"
try:
    genuine = Receipt.model_validate_json(hidden.read_text())
    # Delete the receipt, and plant an unsealed copy of it under another name, long expired.
    hidden.unlink()
    stand_in = results / "pstandin.json"
    stand_in.write_text(genuine.model_copy(update={"mac": ""}).model_dump_json())
    os.utime(stand_in, (1, 1))
except OSError:
    report(reached=False)
report(reached=True)
"""


def four_receipts(c: SandboxClient) -> list[str]:
    ids = [c.start(f"echo run-{i}").process_id for i in range(4)]
    for pid in ids:
        c.wait(pid, timeout=60)
    assert c.verify_receipts() == []
    return ids


def test_a_backdated_receipt_is_not_retired_early(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    with SandboxClient(session_id="backdate", settings=settings_for(sbx_home, None)) as c:
        ids = four_receipts(c)
        assert attack(c, script(BACKDATE, home=str(sbx_home), pid=ids[1]))["reached"]
        c.prune_receipts()
        # Recent by its sealed completion time: kept, and the chain still verifies.
        assert c.receipt(ids[1]).output == "run-1\n"
        assert c.verify_receipts() == []


def test_a_planted_stand_in_does_not_explain_a_deleted_receipt(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    with SandboxClient(session_id="standin", settings=settings_for(sbx_home, None)) as c:
        ids = four_receipts(c)
        assert attack(c, script(STAND_IN, home=str(sbx_home), pid=ids[2]))["reached"]
        before = c.verify_receipts()
        assert any("(moved)" in p for p in before), before
        c.prune_receipts()
        # The stand-in is gone (bounded), but it is no evidence: the deletion stays reported.
        assert not (sbx_home / "logs" / "process-results" / "pstandin.json").exists()
        problems = c.verify_receipts()
        assert any("receipt #3 is missing (deleted)" in p for p in problems), problems
