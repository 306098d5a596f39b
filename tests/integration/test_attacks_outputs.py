"""Attacks on what sbx returns and keeps, from inside real terminal calls through a real
worker: log reads split inside a secret, a truncated output cut after ``KEY=``, a receipt
forged with every plain hash recomputed, a planted receipt symlink, another session's
process ids, and a continuation without the child's consent (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures_attacks import attack, ledger_urls, script
from tests.fixtures_workers import sbx, settings_for
from worker.client import SandboxClient
from worker.errors import ProcessError

PASSWORD = "hunter2-Sup3rS3cret-Qx81"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRETS = (PASSWORD, GITHUB)
# The command prints the secrets without holding them whole.
PRINT = (f"printf 'start\\nexport API_KEY=%s%s\\ntoken: ghp_%s\\ndone\\n' "
         f"{PASSWORD[:8]} {PASSWORD[8:]} {GITHUB[4:]}")  # fmt: skip

FORGE_RECEIPT = """
import os
from pathlib import Path
from process_registry.models import Receipt
from process_registry.receipt_chains import chain_file
results = Path(ARGS["home"]) / "logs" / "process-results"
try:
    names = sorted(os.listdir(results))
except OSError:
    report(reached=False)
mine = [Receipt.model_validate_json((results / n).read_text())
        for n in names if n.endswith(".json")]
mine = sorted((r for r in mine if r.owner_session_id == ARGS["session"]), key=lambda r: r.seq)
prev = None
for i, r in enumerate(mine):
    edited = r.model_copy(update={"output": "FORGED\\n"}) if i == 0 else r
    forged = edited.sealed(r.seq, prev).model_copy(update={"mac": r.mac})
    (results / f"{r.process_id}.json").write_text(forged.model_dump_json())
    prev = forged.sha256
head = Path(ARGS["home"]) / "logs" / "process-chains" / chain_file(ARGS["session"])
if ARGS["delete_chain"]:
    head.unlink()
else:
    data = json.loads(head.read_text())
    data["head_sha"] = prev
    head.write_text(json.dumps(data))
report(reached=True, forged=len(mine))
"""

PLANT_SYMLINK = """
import os
results = os.path.join(ARGS["home"], "logs", "process-results")
try:
    os.symlink("/etc/hostname", os.path.join(results, "pplanted.json"))
except OSError:
    report(reached=False)
report(reached=True)
"""

CONTINUE_WITHOUT_CONSENT = """
from worker.client import SandboxClient
from worker.errors import ProcessError, TokenRequired
ledger()
settings = client_settings()
answers = {}
with SandboxClient(session_id=ARGS["parent"], session_token=ARGS["parent_token"],
                   settings=settings) as c:
    for name, child_token in (("none", None), ("guessed", "sbx1." + "D" * 43)):
        try:
            c.continue_session(ARGS["child"], child_token)
            answers[name] = "recorded"
        except TokenRequired:
            answers[name] = "no_child_token"
        except ProcessError as exc:
            answers[name] = exc.status
report(reached=True, **answers)
"""


def leaked(text: str, minimum: int = 6) -> list[str]:
    """Pieces of a secret (``minimum`` characters or more) that ``text`` shows."""
    return [
        s[i : i + minimum] for s in SECRETS for i in range(len(s) - minimum + 1)
        if s[i : i + minimum] in text
    ]  # fmt: skip


def test_process_log_at_every_offset_and_limit_shows_no_part_of_a_secret(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    with SandboxClient(session_id="logs", settings=settings_for(sbx_home, None)) as c:
        started = c.start(PRINT)
        done = c.wait(started.process_id, timeout=60)
        assert done.status == "exited" and done.output_bytes
        whole = c.logs(started.process_id).text
        assert "start\n" in whole and "[REDACTED]" in whole and not leaked(whole)
        for offset in range(done.output_bytes):
            for limit in (3, 11, 40):
                chunk = c.logs(started.process_id, offset, limit)
                assert not leaked(chunk.text), (offset, limit, chunk.text)
        far = json.loads(c.tool_call("process", {"action": "log", "offset": 1 << 70,
                                                 "process_id": started.process_id}))  # fmt: skip
        assert far["status"] == "invalid" and "Traceback" not in json.dumps(far)


def test_a_truncated_output_never_keeps_a_bare_secret(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None, SBX_OUTPUT_LIMIT="2048")
    line = f"export API_KEY={PASSWORD}\n"
    tail = 2048 - 2048 // 2
    with SandboxClient(session_id="trunc", settings=settings_for(sbx_home, None)) as c:
        # The kept tail starts at each position of the secret's line, "KEY=" included.
        for at in range(line.index("KEY="), len(line) - 1):
            trailer = tail - (len(line) - at) - 1
            command = (
                f"seq 1 1000; printf 'export API_KEY=%s%s\\n' {PASSWORD[:8]} {PASSWORD[8:]}; "
                f"head -c {trailer} /dev/zero | tr '\\0' z; echo"
            )
            r = json.loads(c.tool_call("terminal", {"command": command}))
            assert r["truncated"] and r["output"].endswith("z\n"), r
            assert not leaked(r["output"]), (at, r["output"][-200:])


def test_a_receipt_forged_with_recomputed_hashes_is_reported(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    with SandboxClient(session_id="rcpt", settings=settings_for(sbx_home, None)) as c:
        ids = [c.start(f"echo run-{i}").process_id for i in range(3)]
        for pid in ids:
            c.wait(pid, timeout=60)
        assert c.verify_receipts() == []
        assert c.receipt(ids[0]).output == "run-0\n"
        forged = attack(c, script(FORGE_RECEIPT, home=str(sbx_home), session="rcpt",
                                  delete_chain=False))  # fmt: skip
        assert forged == {**forged, "reached": True, "forged": 3}
        problems = c.verify_receipts()
        assert any("seal does not match" in p for p in problems), problems
        try:
            c.receipt(ids[0])
            raise AssertionError("a forged receipt was returned")
        except ProcessError as exc:
            assert "FORGED" not in json.dumps(exc.result)
        attack(c, script(FORGE_RECEIPT, home=str(sbx_home), session="rcpt", delete_chain=True))
        assert any("chain head is missing" in p for p in c.verify_receipts())
        p = sbx(sbx_home, "receipts", "verify", SBX_SESSION_ID="rcpt",
                SBX_SESSION_TOKEN=c.session_token)  # fmt: skip
        assert p.returncode == 1 and "deleted" in p.stdout


def test_a_planted_receipt_symlink_is_not_found_and_names_no_path(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    with SandboxClient(session_id="plant", settings=settings_for(sbx_home, None)) as c:
        c.wait(c.start("echo real").process_id, timeout=60)  # the receipts directory exists
        assert attack(c, script(PLANT_SYMLINK, home=str(sbx_home)))["reached"]
        p = sbx(sbx_home, "receipts", "show", "pplanted", SBX_SESSION_ID="plant",
                SBX_SESSION_TOKEN=c.session_token)  # fmt: skip
    assert p.returncode == 4, p.stderr
    assert str(sbx_home) not in p.stdout + p.stderr


def test_another_sessions_process_answers_as_an_unknown_one(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    settings = settings_for(sbx_home, None)
    unknown = "p" + "0" * 16
    with SandboxClient(session_id="owner", settings=settings) as owner, \
            SandboxClient(session_id="prober", settings=settings) as prober:  # fmt: skip
        live = owner.start("cat", pty=True).process_id
        for action in ({"action": "poll"}, {"action": "log"}, {"action": "wait", "timeout": 0},
                       {"action": "kill"}, {"action": "write", "data": "rm -rf /\n"}):  # fmt: skip
            theirs = json.loads(prober.tool_call("process", {**action, "process_id": live}))
            nobody = json.loads(prober.tool_call("process", {**action, "process_id": unknown}))
            assert theirs["status"] == "not_found", (action, theirs)  # never approval_required
            assert theirs == {**nobody, "error": nobody["error"].replace(unknown, live)}
        assert owner.poll(live).status == "running"
        owner.kill(live)


def test_a_continuation_needs_the_childs_consent(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    broker, ledger = ledger_urls(sbx_home, None)
    settings = settings_for(sbx_home, None)
    with SandboxClient(session_id="parent", settings=settings) as parent:
        parent.wait(parent.start("echo from-parent").process_id, timeout=60)
        answers = attack(parent, script(
            CONTINUE_WITHOUT_CONSENT, ledger=ledger, broker=broker, parent="parent",
            parent_token=parent.session_token, child="victim-child",
        ))  # fmt: skip
        assert (answers["reached"], answers["none"], answers["guessed"]) == (
            True, "no_child_token", "denied")  # fmt: skip
        # The legitimate path: both tokens (minted here, on the deployment's machine).
        assert parent.continue_session("child").child == "child"
    child_env = {"SBX_SESSION_ID": "child"}
    p = sbx(sbx_home, "receipts", "list", **child_env)
    assert p.returncode == 0 and "  parent  exited" in p.stdout, p.stdout
