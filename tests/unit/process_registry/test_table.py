"""ProcessTable with real local processes: lifecycle, kill races, ownership, secrets."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from environments.backends.local.environment import LocalEnvironment
from environments.base import SpawnedProcess
from environments.errors import ServiceUnreachable
from process_registry.models import NotFound, PermissionDenied, ProcessRecord
from process_registry.table import ProcessTable, ProcessUnreachable
from tests.helpers import files_containing, wait_until
from tests.unit.process_registry.secrets import GITHUB, OPENAI, PASSWORD, SECRETS

OWNER = "s-owner"


def receipts_dir(home: Path) -> Path:
    return home / "logs" / "process-results"


def test_start_poll_wait_receipt_and_checkpoint_order(
    table: ProcessTable, home: Path
) -> None:
    rec = table.start(registry_env(table), "echo hello; exit 3", owner_session_id=OWNER)
    info = table.wait(rec.process_id, OWNER, timeout=30)
    assert (info.status, info.exit_code) == ("exited", 3)
    # Receipt is on disk by the time the waiter is released.
    data = json.loads((receipts_dir(home) / f"{rec.process_id}.json").read_text())
    assert data["output"] == "hello\n" and data["exit_code"] == 3 and data["status"] == "exited"
    assert data["owner_session_id"] == OWNER and data["output_bytes"] == 6
    wait_until(
        lambda: not (home / "checkpoints" / f"{rec.process_id}.json").exists(),
        10,
        "checkpoint gone",
    )
    assert table.poll(rec.process_id, OWNER).status == "exited"
    assert [p.process_id for p in table.list(OWNER)] == [rec.process_id]


def registry_env(table: ProcessTable) -> LocalEnvironment:
    env = table.environment_lookup(None)  # type: ignore[arg-type]
    assert isinstance(env, LocalEnvironment)
    return env


def test_running_process_has_checkpoint_and_poll_says_running(
    table: ProcessTable, env: LocalEnvironment, home: Path
) -> None:
    rec = table.start(env, "echo started; exec sleep 30", owner_session_id=OWNER)
    assert (home / "checkpoints" / f"{rec.process_id}.json").exists()
    assert table.poll(rec.process_id, OWNER).status == "running"
    wait_until(lambda: "started" in table.log(rec.process_id, OWNER).text, 60, "output")
    info = table.kill(rec.process_id, OWNER)
    assert info.status == "killed"
    assert_group_gone(env, rec)


def test_log_by_offset_decodes_split_utf8(table: ProcessTable, env: LocalEnvironment) -> None:
    text = "héllo wörld ✓ 𝄞 " * 50
    rec = table.start(env, f"printf '%s' '{text}'", owner_session_id=OWNER)
    table.wait(rec.process_id, OWNER, timeout=30)
    for limit in (1, 2, 3, 5, 7):
        offset, parts = 0, []
        while True:
            chunk = table.log(rec.process_id, OWNER, offset, limit)
            parts.append(chunk.text)
            if chunk.eof:
                break
            assert chunk.next_offset > offset or limit < 4
            offset = chunk.next_offset if chunk.next_offset > offset else offset
            if chunk.next_offset == offset and not chunk.text:
                limit += 1  # a 4-byte character needs a 4-byte window
        assert "".join(parts) == text


def test_wait_times_out_without_ending(table: ProcessTable, env: LocalEnvironment) -> None:
    rec = table.start(env, "exec sleep 30", owner_session_id=OWNER)
    assert table.wait(rec.process_id, OWNER, timeout=0.05).status == "running"
    table.kill(rec.process_id, OWNER)


def test_timeout_kills_with_status_timeout(
    table: ProcessTable, env: LocalEnvironment
) -> None:
    rec = table.start(env, "exec sleep 30", owner_session_id=OWNER, timeout=0.2)
    info = table.wait(rec.process_id, OWNER, timeout=30)
    assert info.status == "timeout"
    assert not env.is_running(rec.spawned())


def test_kill_escalates_to_sigkill(table: ProcessTable, env: LocalEnvironment) -> None:
    rec = table.start(
        env, "trap '' TERM; echo ready; while :; do sleep 1; done", owner_session_id=OWNER
    )
    wait_until(lambda: "ready" in table.log(rec.process_id, OWNER).text, 60, "trap set")
    info = table.kill(rec.process_id, OWNER)
    # 128 + KILL: what a shell says of a command ended that way (the jail's wrapper,
    # which would record the code, is KILLed with it).
    assert (info.status, info.exit_code) == ("killed", 137), info
    assert_group_gone(env, rec)


def unanswered(
    env: LocalEnvironment, refused: Callable[[int], bool]
) -> Callable[[SpawnedProcess, int], bool]:
    """``env.signal`` of a sandbox that does not answer the signals ``refused`` picks."""
    sends = env.signal

    def send(spawned: SpawnedProcess, signum: int) -> bool:
        if refused(signum):
            raise ServiceUnreachable("the host did not answer")
        return sends(spawned, signum)

    return send


def test_a_kill_its_sandbox_did_not_answer_changes_nothing(
    table: ProcessTable, env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    rec = table.start(env, f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 7",
                      owner_session_id=OWNER)  # fmt: skip
    monkeypatch.setattr(env, "signal", unanswered(env, lambda signum: signum == signal.SIGTERM))
    with pytest.raises(ProcessUnreachable, match="may still run"):
        table.kill(rec.process_id, OWNER)
    assert table.poll(rec.process_id, OWNER).status == "running"
    gate.touch()  # it ends on its own later: that end is its own, not the kill's
    info = table.wait(rec.process_id, OWNER, timeout=60)
    assert (info.status, info.exit_code) == ("exited", 7)


def test_a_kill_whose_sandbox_stops_answering_after_the_term_says_so(
    table: ProcessTable, env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = table.start(
        env, "trap '' TERM; echo ready; while :; do sleep 1; done", owner_session_id=OWNER
    )
    wait_until(lambda: "ready" in table.log(rec.process_id, OWNER).text, 60, "trap set")
    monkeypatch.setattr(env, "signal", unanswered(env, lambda signum: signum != signal.SIGTERM))
    with pytest.raises(ProcessUnreachable, match="got the TERM"):
        table.kill(rec.process_id, OWNER)
    assert table.poll(rec.process_id, OWNER).status == "running"
    monkeypatch.undo()  # the sandbox answers again
    info = table.kill(rec.process_id, OWNER)
    assert (info.status, info.exit_code) == ("killed", 137), info


def test_a_timeout_its_sandbox_did_not_answer_is_tried_again(
    table: ProcessTable, env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = threading.Event()

    def first_term(signum: int) -> bool:
        if signum != signal.SIGTERM or refused.is_set():
            return False
        refused.set()
        return True

    monkeypatch.setattr(env, "signal", unanswered(env, first_term))
    table.expire_retry_s = 0.1
    rec = table.start(env, "exec sleep 600", owner_session_id=OWNER, timeout=0.2)
    info = table.wait(rec.process_id, OWNER, timeout=60)
    assert refused.is_set() and info.status == "timeout", info
    assert not env.is_running(rec.spawned())


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def assert_group_gone(env: LocalEnvironment, rec: ProcessRecord) -> None:
    """Nothing of the process's group is left: not the shell, not what it waited on."""
    assert not env.is_running(rec.spawned())
    assert not env.signal(rec.spawned(), 0)
    survivors = [
        p.pid
        for p in psutil.process_iter()
        if _pgid(p.pid) == rec.pgid and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert survivors == []


def test_exactly_one_receipt_when_kill_races_exit(
    table: ProcessTable, env: LocalEnvironment, home: Path
) -> None:
    for i in range(15):
        rec = table.start(env, "true" if i % 2 else "exit 5", owner_session_id=OWNER)
        barrier = threading.Barrier(3)
        results: list[str] = []

        def killer(
            pid: str = rec.process_id,
            barrier: threading.Barrier = barrier,
            results: list[str] = results,
        ) -> None:
            barrier.wait()
            results.append(table.kill(pid, OWNER).status)

        threads = [threading.Thread(target=killer) for _ in range(2)]
        for t in threads:
            t.start()
        barrier.wait()
        info = table.wait(rec.process_id, OWNER, timeout=30)
        for t in threads:
            t.join()
        assert info.status in ("exited", "killed")
        assert set(results) == {info.status}
        if info.status == "exited":
            assert info.exit_code == (0 if i % 2 else 5)
    files = [n for n in os.listdir(receipts_dir(home)) if n.endswith(".json")]
    assert len(files) == 15
    assert table.receipts.verify([OWNER]) == []


def test_other_sessions_cannot_act(table: ProcessTable, env: LocalEnvironment) -> None:
    rec = table.start(env, "exec sleep 30", owner_session_id=OWNER)
    for call in (
        lambda: table.poll(rec.process_id, "intruder"),
        lambda: table.log(rec.process_id, "intruder"),
        lambda: table.wait(rec.process_id, "intruder", timeout=0),
        lambda: table.kill(rec.process_id, "intruder"),
    ):
        with pytest.raises(PermissionDenied):
            call()
    assert table.list("intruder") == []
    assert env.is_running(rec.spawned())
    table.kill(rec.process_id, OWNER)
    with pytest.raises(PermissionDenied):
        table.poll(rec.process_id, "intruder")
    with pytest.raises(NotFound):
        table.poll("p0000000000000000", OWNER)


def test_finished_receipt_readable_by_continuation_only(
    home: Path, env: LocalEnvironment, spool: Path
) -> None:
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool)
    rec = reg.start(env, "echo done", owner_session_id=OWNER)
    reg.wait(rec.process_id, OWNER, timeout=30)
    reg.close()
    # A fresh worker knows the process only through its receipt.
    reg2 = ProcessTable(home, lambda rec: env, spool_dir=spool)
    try:
        reg2.continuations.record(OWNER, "s-continued")
        assert reg2.poll(rec.process_id, "s-continued").exit_code == 0
        assert reg2.log(rec.process_id, "s-continued").text == "done\n"
        with pytest.raises(PermissionDenied):
            reg2.poll(rec.process_id, "s-unrelated")
    finally:
        reg2.close()


def test_linger_waits_for_the_sessions_processes(
    table: ProcessTable, env: LocalEnvironment
) -> None:
    recs = [table.start(env, f"exit {i}", owner_session_id=OWNER) for i in range(3)]
    infos = table.linger(OWNER, timeout=30)
    assert sorted(i.exit_code or 0 for i in infos) == [0, 1, 2]
    assert {i.process_id for i in infos} == {r.process_id for r in recs}


def test_a_process_ending_while_its_view_is_built_never_looks_lost(
    table: ProcessTable, env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "go"
    os.mkfifo(go)
    rec = table.start(env, f"read -r line < {go}; exit 3", owner_session_id=OWNER)
    caller = threading.get_ident()
    real_read = env.read_output

    def read_while_it_ends(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == caller:  # the view's read, not the receipt's
            monkeypatch.setattr(env, "read_output", real_read)
            go.write_text("now\n")  # blocks until the command reads: then it exits
            table.wait(rec.process_id, OWNER, timeout=30)  # its end is recorded now
        return real_read(*args, **kwargs)

    monkeypatch.setattr(env, "read_output", read_while_it_ends)
    seen = table.poll(rec.process_id, OWNER)
    assert (seen.status, seen.exit_code) == ("running", None)  # the view from before its end
    after = table.poll(rec.process_id, OWNER)
    assert (after.status, after.exit_code) == ("exited", 3)


def test_no_secret_in_any_file_under_home(
    table: ProcessTable, env: LocalEnvironment, home: Path
) -> None:
    cmd = f"echo {GITHUB}; echo key={OPENAI}; echo password={PASSWORD}"
    running = table.start(env, f"{cmd}; exec sleep 30", owner_session_id=OWNER)
    done = table.start(env, f"echo 'export TOKEN={GITHUB}'; {cmd}", owner_session_id=OWNER)
    table.wait(done.process_id, OWNER, timeout=30)
    wait_until(lambda: "key=" in table.log(running.process_id, OWNER).text, 60, "output")
    chunk = table.log(running.process_id, OWNER)
    assert not any(s in chunk.text for s in SECRETS)

    def leaks() -> list[str]:
        return files_containing(home, SECRETS)

    assert leaks() == []  # while one still runs (its checkpoint holds the command)
    table.kill(running.process_id, OWNER)
    assert leaks() == []
