"""A worker serves many sessions at once: one session's queue of calls never holds the
threads another session needs, and a session's calls in flight are capped."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient


def run(client: SandboxClient, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command}))
    return result


def test_a_busy_session_does_not_hold_the_threads_another_session_needs(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    # Two threads take calls in and two run them: nine blocked calls of one session
    # used to hold both while they waited for their session's shell.
    start_worker(None, SBX_CONCURRENCY="2", SBX_MAX_RUNNING="2")
    gate = tmp_path / "gate"
    settings = settings_for(sbx_home, None)
    busy = SandboxClient(session_id="busy", settings=settings)
    answers: list[dict[str, Any]] = []
    blocked = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo released"
    threads = [
        threading.Thread(target=lambda: answers.append(run(busy, blocked))) for _ in range(9)
    ]
    for t in threads:
        t.start()
    with SandboxClient(session_id="other", settings=settings) as other:
        # The busy session's first call runs and the rest wait: the other session is served.
        wait_until(lambda: busy.ledger.client.hlen("sbx:calls:running") >= 9, 60,
                   "the busy session's calls to be taken in")  # fmt: skip
        assert run(other, "echo served")["output"] == "served\n"
        assert answers == []  # all nine still wait for the gate
    gate.touch()
    for t in threads:
        t.join(120)
    assert [a["output"] for a in answers] == ["released\n"] * 9
    busy.close()


def test_calls_beyond_a_sessions_cap_are_answered_busy_at_once(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(None, SBX_SESSION_MAX_IN_FLIGHT="3")
    gate = tmp_path / "gate"
    settings = settings_for(sbx_home, None)
    client = SandboxClient(session_id="capped", settings=settings)
    blocked = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo released"
    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(run(client, blocked))) for _ in range(5)
    ]
    for t in threads:
        t.start()
    wait_until(lambda: len(answers) == 2, 60, "two calls over the cap to be answered")
    assert [a["status"] for a in answers] == ["busy", "busy"]
    assert "SBX_SESSION_MAX_IN_FLIGHT" in answers[0]["error"]
    gate.touch()
    for t in threads:
        t.join(120)
    assert sorted(a.get("output", "") for a in answers[2:]) == ["released\n"] * 3
    client.close()
