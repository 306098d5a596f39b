"""Attacks on sbx's credentials from inside real terminal calls through a real worker:
a forged result, self-approval and forged grants, expired and revoked tokens. Each
asserts the attack fails and the legitimate path still works (issue 12)."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_attacks import attack, ledger_urls, script
from tests.fixtures_workers import sbx, settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient
from worker.errors import ForgedResult

FORGE_RESULT = """
r = ledger()
call = ARGS["call_id"]
fake = json.dumps({"output": "FORGED-7Q\\n", "exit_code": 0, "error": None, "cwd": "/",
                   "truncated": False, "duration_ms": 1})
r.rpush(f"sbx:call:{call}:result", fake, "sbx-sealed:1:" + "A" * 43 + ":" + fake)
if ARGS["block"]:
    r.set(f"sbx:call:{call}:delivered", "1", nx=True, ex=600)
report(reached=True)
"""

SELF_APPROVE = """
from worker.client import SandboxClient
from registry.approval.store import command_digest
r = ledger()
settings = client_settings()
answers = {}
for name, token in (("given", ARGS["token"]), ("guessed", "sbx1." + "B" * 43)):
    with SandboxClient(session_id=ARGS["session"], session_token=token, settings=settings,
                       approver_token="sbxa1.AAAAAAAA." + "C" * 43) as c:
        answers[name] = c.approve(ARGS["approval_id"], "session").status
with SandboxClient(session_id=ARGS["session"], session_token=ARGS["token"],
                   settings=settings) as c:
    answers["id_only"] = c.approve(ARGS["approval_id"]).status
# Grants written straight into the ledger, as the approval store keeps them.
digest = command_digest(ARGS["session"], ARGS["command"])
r.set(f"sbx:approval:once:{digest}", "9999999999")
r.sadd(f"sbx:approval:session:{ARGS['session']}", ARGS["pattern_key"])
r.sadd("sbx:approval:always", command_digest("*", ARGS["command"]))
report(reached=True, **answers)
"""

USE_TOKEN = """
from worker.client import SandboxClient
ledger()
settings = client_settings()
with SandboxClient(session_id=ARGS["session"], session_token=ARGS["token"],
                   settings=settings) as c:
    answer = json.loads(c.tool_call("terminal", {"command": "echo ran-7Z"}))
report(reached=True, status=answer.get("status"), ran="ran-7Z" in (answer.get("output") or ""))
"""


@pytest.mark.parametrize("block", [False, True], ids=["genuine-follows", "genuine-blocked"])
def test_a_result_forged_into_another_calls_mailbox_is_never_returned(
    sbx_home: Path, broker_url: str | None, start_worker: Any, block: bool
) -> None:
    start_worker(broker_url)
    ledger = ledger_urls(sbx_home, broker_url)[1]
    settings = settings_for(sbx_home, broker_url)
    call_id = uuid.uuid4().hex
    with SandboxClient(session_id="attacker", settings=settings) as attacker:
        done = attack(attacker, script(FORGE_RESULT, ledger=ledger, call_id=call_id, block=block))
    assert done.get("reached"), done
    with SandboxClient(session_id="victim", settings=settings) as victim:
        if not block:
            # The forged answers wait in the mailbox first; the client drops them.
            r = json.loads(victim.tool_call("terminal", {"command": "echo genuine"},
                                            call_id=call_id))  # fmt: skip
            assert r["output"] == "genuine\n"
            return
        # The genuine answer cannot be delivered: the client says so, and returns nothing.
        with pytest.raises(ForgedResult, match="failed their authentication"):
            victim.tool_call("terminal", {"command": "echo genuine"}, call_id=call_id, wait=15)
        assert victim.exec("echo after").output == "after\n"


def test_self_approval_with_the_approval_id_or_the_session_token_fails(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(None)
    broker, ledger = ledger_urls(sbx_home, None)
    victim = tmp_path / "victim"
    victim.mkdir()
    command = f"cd {tmp_path} && rm -rf victim"
    with SandboxClient(session_id="appr", settings=settings_for(sbx_home, None)) as client:
        refused = json.loads(client.tool_call("terminal", {"command": command}))
        assert refused["status"] == "approval_required"
        answers = attack(client, script(
            SELF_APPROVE, ledger=ledger, broker=broker, session="appr",
            token=client.session_token, approval_id=refused["approval_id"], command=command,
            pattern_key=refused["pattern_key"],
        ))  # fmt: skip
        assert answers.get("reached"), answers
        assert (answers["given"], answers["guessed"], answers["id_only"]) == (
            "denied", "denied", "denied")  # fmt: skip
        # Grants written into the ledger without a worker's seal count for nothing.
        again = json.loads(client.tool_call("terminal", {"command": command}))
        assert again["status"] == "approval_required"
        assert victim.exists()
        # The legitimate path: the platform's approver credential (minted here: this
        # process holds the deployment's key, as the platform's approval service would).
        assert client.approve(refused["approval_id"], "once").status == "approved"
        assert json.loads(client.tool_call("terminal", {"command": command}))["exit_code"] == 0
        assert not victim.exists()


def test_the_cli_approves_only_with_the_approver_credential(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(None)
    broker, ledger = ledger_urls(sbx_home, None)
    with SandboxClient(session_id="cli-appr", settings=settings_for(sbx_home, None)) as client:
        refused = json.loads(
            client.tool_call("terminal", {"command": f"cd {tmp_path} && rm -rf x"})
        )
        token = client.session_token
    elsewhere = tmp_path / "elsewhere"  # a machine without the key
    env = {"SBX_HOME": str(elsewhere), "SBX_BROKER_URL": broker, "SBX_LEDGER_URL": ledger,
           "SBX_SESSION_ID": "cli-appr", "SBX_SESSION_TOKEN": token}  # fmt: skip
    p = sbx(sbx_home, "approve", refused["approval_id"], **env)
    assert p.returncode == 3 and "approver credential" in p.stdout + p.stderr
    approver = sbx(sbx_home, "approver", "token").stdout.strip()
    assert approver.startswith("sbxa1.")
    p = sbx(sbx_home, "approve", refused["approval_id"], **env, SBX_APPROVER_TOKEN=approver)
    assert p.returncode == 0, p.stderr


def test_expired_and_revoked_tokens_stop_working_on_the_worker(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    broker, ledger = ledger_urls(sbx_home, None)
    settings = settings_for(sbx_home, None)

    def use(helper: SandboxClient, session: str, token: str) -> dict[str, Any]:
        """The attack's outcome (from the sandbox, or from outside where the jail keeps the
        ledger out of its reach: the worker's check must hold either way)."""
        result = attack(helper, script(USE_TOKEN, ledger=ledger, broker=broker,
                                       session=session, token=token))  # fmt: skip
        result.pop("from_outside", None)
        return result

    with SandboxClient(session_id="helper", settings=settings) as helper:
        # Expiry: a one-second token works until it expires, then never again.
        short = sbx(sbx_home, "session", "token", "short", "--ttl", "1s").stdout.strip()
        with SandboxClient(session_id="short", session_token=short, settings=settings) as c:
            wait_until(lambda: json.loads(c.tool_call("terminal", {"command": "true"}))
                       .get("status") == "denied", 60, "the token to expire")  # fmt: skip
        assert use(helper, "short", short) == {"reached": True, "status": "denied", "ran": False}
        # Revocation: a valid token works, is revoked, and is denied on the worker.
        p = sbx(sbx_home, "session", "token", "rev", "--ttl", "8h")
        old = p.stdout.strip()
        assert use(helper, "rev", old)["ran"] is True
        assert sbx(sbx_home, "session", "revoke", "rev").returncode == 0
        assert use(helper, "rev", old) == {"reached": True, "status": "denied", "ran": False}
        new = sbx(sbx_home, "session", "token", "rev").stdout.strip()
        assert use(helper, "rev", new)["ran"] is True


def test_v1_tokens_verify_until_the_operator_turns_them_off(
    sbx_home: Path, start_worker: Any
) -> None:
    from process_registry.sessions import SessionSigner, load_or_create_secret

    v1 = SessionSigner(load_or_create_secret(sbx_home / "secret.key")).token_v1("old")
    settings = settings_for(sbx_home, None)
    worker = start_worker(None)
    with SandboxClient(session_id="old", session_token=v1, settings=settings) as c:
        assert c.exec("echo v1").output == "v1\n"
    worker.stop()
    start_worker(None, SBX_ACCEPT_V1_TOKENS="false")
    with SandboxClient(session_id="old", session_token=v1, settings=settings) as c:
        assert json.loads(c.tool_call("terminal", {"command": "true"}))["status"] == "denied"
        c2 = SandboxClient(session_id="old", settings=settings)  # v2, minted here
        assert c2.exec("echo v2").output == "v2\n"
        c2.close()


def test_the_token_never_travels_in_a_queued_message(sbx_home: Path) -> None:
    settings = settings_for(sbx_home, None, secret_key="k" * 32)
    with SandboxClient(session_id="quiet", settings=settings) as client:
        first = json.loads(client.tool_call("terminal", {"command": "echo q"}, wait=0.2))
        assert first["status"] == "pending"
        bodies = [base64.b64decode(json.loads(m)["body"])
                  for m in client.ledger.client.lrange(settings.queue, 0, -1)]  # fmt: skip
        assert bodies and all(b'"proof"' in b for b in bodies)
        assert all(client.session_token.encode() not in b for b in bodies)


def test_a_tampered_call_message_is_denied(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    with SandboxClient(session_id="tamper", settings=settings_for(sbx_home, None)) as client:
        message = client.call_message("terminal", {"command": "echo harmless"})
        evil = message.model_copy(update={"args": {"command": "echo evil-7K"}})
        client.sender.send_call(evil)
        answer = json.loads(client.result(evil.call_id, 60))
        assert answer["status"] == "denied" and "evil" not in json.dumps(answer)


def test_concurrent_calls_each_get_their_own_sealed_answer(
    sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None)
    answers: dict[int, str] = {}
    with SandboxClient(session_id="many", settings=settings_for(sbx_home, None)) as client:
        threads = [threading.Thread(target=lambda i=i: answers.__setitem__(
            i, client.exec(f"echo n{i}").output)) for i in range(6)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert answers == {i: f"n{i}\n" for i in range(6)}
