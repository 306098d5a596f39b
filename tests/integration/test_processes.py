"""Background processes through real worker processes: lifecycle, ownership, adoption, receipts."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from process_registry.runtime_dir import runtime_dir
from tests.fixtures_workers import sbx, settings_for
from tests.helpers import files_containing, wait_until
from worker.client import SandboxClient
from worker.errors import ProcessError

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-" + "proj" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
SECRETS = (GITHUB, OPENAI)
# Commands print the secrets without containing them (a separate test covers
# secrets in the command itself).
PRINT_SECRETS = f"printf 'ghp_%s\\nkey=sk-%s\\n' {GITHUB[4:]} {OPENAI[3:]}"

@pytest.fixture
def launch(start_worker: Any) -> Any:
    """``launch(broker_url)``: a real worker process (with its process service), ready."""
    return start_worker


def client(home: Path, session: str, broker_url: str | None = None, **kw: Any) -> SandboxClient:
    return SandboxClient(session_id=session, settings=settings_for(home, broker_url), **kw)


def token(home: Path, session: str) -> str:
    from process_registry.sessions import SessionSigner, load_or_create_secret

    return SessionSigner(load_or_create_secret(home / "secret.key")).token(session)


def test_background_lifecycle(sbx_home: Path, broker_url: str | None, launch: Any) -> None:
    launch(broker_url)
    with client(sbx_home, "s1", broker_url) as c:
        c.exec("cd /tmp && export LIFE_VAR=kept")
        started = c.start('echo "$LIFE_VAR $(pwd)"; exit 3')
        done = c.wait(started.process_id, timeout=60)
        assert (done.status, done.exit_code) == ("exited", 3)
        assert c.logs(started.process_id).text == "kept /tmp\n"
        long = c.start("echo up; exec sleep 300", workdir="/")
        assert c.poll(long.process_id).status == "running"
        killed = c.kill(long.process_id)
        assert killed.status == "killed"
        ids = {p.process_id for p in c.processes()}
        assert {started.process_id, long.process_id} <= ids
        receipt = c.receipt(started.process_id)
        assert (receipt.exit_code, receipt.output, receipt.owner_session_id) == (3, "kept /tmp\n",
                                                                                 "s1")  # fmt: skip
        assert c.verify_receipts() == []


def test_pty_process_takes_input(sbx_home: Path, launch: Any) -> None:
    launch()
    with client(sbx_home, "tty") as c:
        p = c.start('read line; echo "got:$line"; test -t 0 && echo tty', pty=True)
        assert c.write(p.process_id, "hello\n").bytes_written == 6
        done = c.wait(p.process_id, timeout=60)
        assert (done.status, done.exit_code) == ("exited", 0)
        out = c.logs(p.process_id).text
        assert "got:hello" in out and "tty" in out
        plain = c.start("exec sleep 300")
        with pytest.raises(ProcessError, match="pty"):
            c.write(plain.process_id, "x\n")
        c.kill(plain.process_id)


def test_process_tool_malformed_args(sbx_home: Path, launch: Any) -> None:
    launch()
    with client(sbx_home, "bad") as c:
        malformed: list[Any] = [
            {"action": "explode"},
            {"action": "poll"},
            {"action": "log", "process_id": 5},
            {"action": "list", "surprise": 1},
            "{not json",
            {"action": "write", "process_id": "p1"},
            {"action": "poll", "process_id": "../../etc"},
        ]
        for args in malformed:
            result = json.loads(c.tool_call("process", args))
            assert result.get("error"), args
            assert "Traceback" not in json.dumps(result)


def test_cross_session_is_not_found_and_continuation_may_read(
    sbx_home: Path, launch: Any
) -> None:
    launch()
    with client(sbx_home, "alice") as alice, client(sbx_home, "mallory") as mallory:
        secret_cmd = "echo private-output-123; exit 4"
        done = alice.start(secret_cmd)
        alice.wait(done.process_id, timeout=60)
        live = alice.start("echo private-live-456; exec sleep 300")
        for pid in (done.process_id, live.process_id):
            for action in ("poll", "log", "wait", "kill"):
                raw = mallory.tool_call("process", {"action": action, "process_id": pid})
                result = json.loads(raw)
                # Another session's id answers as an unknown one does (issue 12): no oracle.
                assert result["status"] == "not_found", (action, result)
                assert "private" not in raw
            with pytest.raises(ProcessError) as info:
                mallory.receipt(pid) if pid == done.process_id else mallory.poll(pid)
            assert info.value.status == "not_found"
        assert alice.poll(live.process_id).status == "running"  # mallory's kill did nothing
        bob_env = {"SBX_SESSION_ID": "mallory", "SBX_SESSION_TOKEN": token(sbx_home, "mallory")}
        for args in (("poll", live.process_id), ("receipts", "show", done.process_id),
                     ("logs", live.process_id), ("kill", live.process_id)):  # fmt: skip
            p = sbx(sbx_home, *args, **bob_env)
            assert p.returncode == 4, (args, p.stdout, p.stderr)
            assert "private" not in p.stdout + p.stderr
        forged = {"SBX_SESSION_ID": "alice", "SBX_SESSION_TOKEN": "sbx1.forged"}
        p = sbx(sbx_home, "receipts", "show", done.process_id, **forged)
        assert p.returncode == 3 and "private" not in p.stdout
        assert sbx(sbx_home, "poll", "pnosuchprocess0", **bob_env).returncode == 4
        # Continuation: needs the parent's token, then the child reads the parent's receipts.
        p = sbx(sbx_home, "session", "continue", "alice", "alice-2", **forged)
        assert p.returncode == 3
        alice_env = {"SBX_SESSION_ID": "alice", "SBX_SESSION_TOKEN": token(sbx_home, "alice")}
        p = sbx(sbx_home, "session", "continue", "alice", "alice-2", "--json", **alice_env)
        assert p.returncode == 0, p.stderr
        child_env = {"SBX_SESSION_ID": "alice-2", "SBX_SESSION_TOKEN": token(sbx_home, "alice-2")}
        p = sbx(sbx_home, "receipts", "show", done.process_id, "--json", **child_env)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["exit_code"] == 4
        p = sbx(sbx_home, "receipts", "show", done.process_id, **bob_env)
        assert p.returncode == 4
        alice.kill(live.process_id)


def test_cli_start_wait_logs_and_verify(sbx_home: Path, launch: Any) -> None:
    launch()
    env = {"SBX_SESSION_ID": "cli-s", "SBX_SESSION_TOKEN": token(sbx_home, "cli-s")}
    p = sbx(sbx_home, "start", "--", "echo from-cli; exit 2", **env)
    assert p.returncode == 0, p.stderr
    process_id = p.stdout.strip()
    p = sbx(sbx_home, "wait", process_id, "--json", **env)
    assert (json.loads(p.stdout)["status"], json.loads(p.stdout)["exit_code"]) == ("exited", 2)
    assert sbx(sbx_home, "logs", process_id, "--follow", **env).stdout == "from-cli\n"
    p = sbx(sbx_home, "receipts", "list", "--json", **env)
    assert [r["process_id"] for r in json.loads(p.stdout)] == [process_id]
    p = sbx(sbx_home, "receipts", "verify", "--json", **env)
    assert (p.returncode, json.loads(p.stdout)["ok"]) == (0, True)
    p = sbx(sbx_home, "session", "token", "cli-s")
    # Tokens carry their expiry (issue 12): the CLI's is another valid token of the session.
    from process_registry.sessions import SessionSigner, load_or_create_secret

    assert SessionSigner(load_or_create_secret(sbx_home / "secret.key")).verify(
        "cli-s", p.stdout.strip()
    )


def test_sigkilled_worker_with_20_processes(
    sbx_home: Path, broker_url: str | None, launch: Any, tmp_path: Path
) -> None:
    worker = launch(broker_url)
    gate = tmp_path / "gate"
    expected: dict[str, int] = {}
    with client(sbx_home, "crash", broker_url) as c:
        for i in range(20):
            if i % 2:
                cmd = f"echo quick{i}; exit {i}"
            else:
                cmd = f"while [ ! -e {gate} ]; do sleep 0.05; done; {PRINT_SECRETS}; exit {i}"
            expected[c.start(cmd).process_id] = i
        worker.stop(signal.SIGKILL)
        launch(broker_url)
        gate.touch()
        for process_id, code in expected.items():
            info = c.wait(process_id, timeout=120)
            assert (info.status, info.exit_code) == ("exited", code), process_id
            assert c.receipt(process_id).exit_code == code
        assert c.verify_receipts() == []
    env = {"SBX_SESSION_ID": "crash", "SBX_SESSION_TOKEN": token(sbx_home, "crash")}
    p = sbx(sbx_home, "receipts", "verify", **env) if broker_url is None else None
    if p is not None:
        assert p.returncode == 0, p.stdout + p.stderr
    wait_until(
        lambda: not [n for n in os.listdir(sbx_home / "checkpoints") if n.endswith(".json")],
        30,
        "checkpoints removed",
    )
    assert leaks(sbx_home) == []


def test_secrets_absent_under_home(sbx_home: Path, launch: Any) -> None:
    launch()
    with client(sbx_home, "leaky") as c:
        cmd = PRINT_SECRETS
        done = c.start(cmd)
        c.wait(done.process_id, timeout=60)
        running = c.start(f"{cmd}; exec sleep 300")
        wait_until(lambda: "key=" in c.logs(running.process_id).text, 30, "output")
        assert not any(s in c.logs(running.process_id).text for s in SECRETS)
        assert not any(s in c.receipt(done.process_id).output for s in SECRETS)
        assert leaks(sbx_home) == []
        c.kill(running.process_id)
    assert leaks(sbx_home) == []


def leaks(home: Path) -> list[str]:
    return files_containing(home, SECRETS)


def test_linger_waits_for_the_sessions_processes(sbx_home: Path, launch: Any) -> None:
    launch()
    with client(sbx_home, "oneshot") as c:
        ids = [c.start(f"echo p{i}; exit {i}").process_id for i in range(3)]
        final = {p.process_id: p for p in c.linger(timeout=120)}
    assert {pid: (final[pid].status, final[pid].exit_code) for pid in ids} == {
        ids[0]: ("exited", 0),
        ids[1]: ("exited", 1),
        ids[2]: ("exited", 2),
    }
    env = {"SBX_SESSION_ID": "oneshot", "SBX_SESSION_TOKEN": token(sbx_home, "oneshot")}
    p = sbx(sbx_home, "wait", "--all", "--timeout", "30", "--json", **env)
    assert sorted(x["exit_code"] for x in json.loads(p.stdout)) == [0, 1, 2]


def test_kill_racing_exit_leaves_exactly_one_receipt(sbx_home: Path, launch: Any) -> None:
    launch()
    with client(sbx_home, "racer") as c:
        started = [c.start("exit 5").process_id for _ in range(8)]
        for process_id in started:
            c.kill(process_id)  # the process may have exited already: either way one receipt
        for process_id in started:
            r = c.receipt(process_id)
            assert (r.status, r.exit_code) in {("exited", 5), ("killed", r.exit_code)}
        assert sorted(r.process_id for r in c.receipts()) == sorted(started)
        assert c.verify_receipts() == []


def test_retention_by_count_through_the_cli(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None, SBX_RECEIPT_MAX_COUNT="3")
    env = {"SBX_SESSION_ID": "keep3", "SBX_SESSION_TOKEN": token(sbx_home, "keep3")}
    with client(sbx_home, "keep3") as c:
        ids = [c.start(f"exit {i}").process_id for i in range(5)]
        for process_id in ids:
            c.wait(process_id, timeout=60)
    p = sbx(sbx_home, "receipts", "prune", "--json", **env)
    assert p.returncode == 0, p.stderr
    p = sbx(sbx_home, "receipts", "list", "--json", **env)
    kept = [r["process_id"] for r in json.loads(p.stdout)]
    assert len(kept) == 3
    assert set(kept) <= set(ids)


def test_output_cap_bounds_the_spool_and_log_says_what_was_discarded(
    sbx_home: Path, launch: Any
) -> None:
    cap = 1 << 20
    launch(SBX_PROCESS_OUTPUT_CAP=str(cap))
    with client(sbx_home, "chatty") as c:
        # About 20 MiB of numbered lines, far past the cap.
        started = c.start("seq 1 2600000")
        done = c.wait(started.process_id, timeout=120)
        assert done.status == "exited"
        extra = done.model_extra or {}
        assert (extra["output_cap"], extra["output_cap_enforced"]) == (cap, True)
        total = done.output_bytes
        assert total is not None and total > 15 * cap
        chunk = c.logs(started.process_id, 0)
        gone = (chunk.model_extra or {})["discarded_before"]
        assert total - cap <= gone <= chunk.offset and "\x00" not in chunk.text
        first = int(chunk.text.split("\n", 1)[0])  # starts at a whole line
        assert chunk.text.startswith(f"{first}\n{first + 1}\n")
        receipt = c.receipt(started.process_id)
        assert receipt.output_bytes == total and receipt.output.endswith("2600000\n")
        assert receipt.output.startswith(f"[... {chunk.offset} earlier bytes discarded")
        # The spool is private to the home (never a predictable name in /tmp).
        spool = list(runtime_dir(sbx_home).rglob(f"{started.process_id}.out"))
        assert len(spool) == 1 and spool[0].stat().st_blocks * 512 <= cap + (128 << 10)
