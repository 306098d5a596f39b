"""Terminal calls through a real worker process, on the embedded broker and on real Redis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import call, files_containing
from worker.client import AsyncSandboxClient, SandboxClient


@pytest.fixture
def client(broker_url: str | None, sbx_home: Path, start_worker: Any) -> Any:
    start_worker(broker_url)
    c = SandboxClient(session_id="s1", settings=settings_for(sbx_home, broker_url))
    yield c
    c.close()


def test_session_state_persists_and_is_isolated(
    client: SandboxClient, sbx_home: Path, broker_url: str | None
) -> None:
    r = call(client, "terminal", {"command": "cd / && export SBX_DEMO_VAR=kept && echo ok"})
    assert (r["output"], r["exit_code"], r["error"], r["cwd"]) == ("ok\n", 0, None, "/")
    assert set(r) == {"output", "exit_code", "error", "cwd", "truncated", "duration_ms"}
    r = call(client, "terminal", {"command": 'pwd; echo "$SBX_DEMO_VAR"'})
    assert r["output"] == "/\nkept\n"
    with SandboxClient(session_id="s2", settings=settings_for(sbx_home, broker_url)) as other:
        r = call(other, "terminal", {"command": 'echo "[${SBX_DEMO_VAR-}]"; pwd'})
    assert r["output"].startswith("[]\n")
    assert r["output"] != "[]\n/\n"


def test_exit_code_timeout_and_recovery(client: SandboxClient) -> None:
    r = call(client, "terminal", {"command": "echo out; exit 3"})
    assert (r["output"], r["exit_code"]) == ("out\n", 3)
    r = call(client, "terminal", {"command": "sleep 60", "timeout": 1})
    assert r["exit_code"] == 124
    assert "timed out" in r["error"]
    r = call(client, "terminal", {"command": "echo back"})
    assert (r["output"], r["exit_code"]) == ("back\n", 0)


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("nope", {}, "Unknown tool"),
        ("terminal", {"command": 42}, "command: Input should be a valid string"),
        ("terminal", {}, "command: Field required"),
        ("terminal", {"command": "ls", "timeout": "5"}, "timeout: Input should be a valid integer"),
        ("terminal", {"command": "ls", "bogus": 1}, "bogus: Extra inputs are not permitted"),
        ("terminal", "{not json", "not valid JSON"),
        ("terminal", "[1, 2]", "must be a JSON object"),
        ("terminal", {"command": "ls", "workdir": "/does/not/exist"}, "does not exist"),
        ("terminal", {"command": "echo a\u0000b"}, "NUL"),
        ("terminal", {"command": "echo \udcff"}, "command: Input should be a valid string"),
        ("terminal", '{"command": "ls", "workdir": "/tmp/\\udcff"}', "no lone surrogates"),
    ],
)
def test_malformed_calls_get_json_errors(
    client: SandboxClient, tool: str, args: Any, expected: str
) -> None:
    raw = client.tool_call(tool, args)
    result = json.loads(raw)
    assert expected in result["error"]
    assert "Traceback" not in raw


def test_typed_exec_helper(client: SandboxClient) -> None:
    r = client.exec("printf abc")
    assert (r.output, r.exit_code, r.error) == ("abc", 0, None)


def test_wrong_token_is_denied(sbx_home: Path, broker_url: str | None, start_worker: Any) -> None:
    start_worker(broker_url)
    settings = settings_for(sbx_home, broker_url)
    with SandboxClient(session_id="victim", session_token="sbx1.forged", settings=settings) as c:
        r = json.loads(c.tool_call("terminal", {"command": "echo should-not-run"}))
    assert r["status"] == "denied"
    assert "output" not in r


async def test_async_client(sbx_home: Path, broker_url: str | None, start_worker: Any) -> None:
    start_worker(broker_url)
    async with AsyncSandboxClient(
        session_id="async", settings=settings_for(sbx_home, broker_url)
    ) as c:
        r = await c.exec("echo async")
        raw = await c.tool_call("terminal", {"command": "echo raw"})
    assert r.output == "async\n"
    assert json.loads(raw)["output"] == "raw\n"


def test_secrets_never_reach_a_file_under_sbx_home(client: SandboxClient, sbx_home: Path) -> None:
    secret = "ghp_" + "Zq8Wx7Ec6Rv5Tb4Yn3Um2Ik1Ol0Pa9Sd8Fg7Hj6"
    r = call(client, "terminal", {"command": f"echo token={secret}; export GH_TOKEN={secret}"})
    assert secret not in r["output"]
    assert "[REDACTED]" in r["output"]
    call(client, "terminal", {"command": 'echo "$GH_TOKEN" | wc -c'})
    leaks = files_containing(sbx_home, [secret])
    assert leaks == []


def test_a_pending_call_is_collected_later_and_its_message_hides_the_command(
    sbx_home: Path, broker_url: str | None, start_worker: Any, tmp_path: Path
) -> None:
    settings = settings_for(sbx_home, broker_url, secret_key="k" * 32)
    with SandboxClient(session_id="later", settings=settings) as client:
        # Published with the call's own time budget: a short wait in ``tool_call`` would also
        # be the deadline the worker gives the command (the caller said it stops waiting).
        message = client.call_message("terminal", {"command": "echo queued-7f3"})
        client.sender.send_call(message)
        call_id = message.call_id
        first = json.loads(client.result(call_id, wait=0.2))
        assert (first["status"], first["call_id"]) == ("pending", call_id)
        # Queued with no worker: the command is in the body only, never in a header.
        queued = [json.loads(m) for m in client.ledger.client.lrange(settings.queue, 0, -1)]
        mine = [m for m in queued if m["headers"]["id"] == call_id]
        assert len(mine) == 1
        assert "queued-7f3" not in json.dumps(mine[0]["headers"])
        start_worker(broker_url, SBX_SECRET_KEY="k" * 32)
        result = json.loads(client.result(call_id, wait=60))
        assert (result["output"], result["exit_code"]) == ("queued-7f3\n", 0)
        # Results go to the call's mailbox, not to Celery's result backend.
        assert client.ledger.client.exists(f"celery-task-meta-{call_id}") == 0
        # Collected already: asking again (a retry) gets the same result at once.
        again = json.loads(client.result(call_id, wait=60))
        assert again == result
