"""The vercel_sandbox backend end to end: a real worker process, the fake Vercel API,
approval enforced, credentials kept out of SBX_HOME."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import files_containing, require_module
from worker.client import SandboxClient

require_module("vercel.sandbox", "pip install 'sbx[vercel]'")


@pytest.fixture
def vercel_client(fake_vercel: Any, sbx_home: Path, start_worker: Any) -> Any:
    from tests.fakes.vercel import PROJECT_ID, TEAM_ID, TOKEN

    start_worker(
        None,
        SBX_VERCEL_SANDBOX_BASE_URL=fake_vercel.base_url,
        SBX_VERCEL_SANDBOX_TOKEN=TOKEN,
        SBX_VERCEL_SANDBOX_TEAM_ID=TEAM_ID,
        SBX_VERCEL_SANDBOX_PROJECT_ID=PROJECT_ID,
        SBX_VERCEL_SANDBOX_READ_VERCEL_ENV="false",
        SBX_VERCEL_SANDBOX_KILL_GRACE="0.5",
        SBX_ALLOWED_BACKENDS="local,vercel_sandbox",
    )
    client = SandboxClient(
        session_id="vsess", backend="vercel_sandbox", settings=settings_for(sbx_home, None)
    )
    yield client
    client.close()


def run(client: SandboxClient, command: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command, **extra}))
    return result


def test_vercel_session_through_worker(
    vercel_client: SandboxClient, fake_vercel: Any, sbx_home: Path
) -> None:
    r = run(vercel_client, "cd /tmp && export IN_VERCEL=1 && echo started")
    assert (r["output"], r["exit_code"], r["cwd"]) == ("started\n", 0, "/tmp")
    r = run(vercel_client, 'echo "$IN_VERCEL in $PWD"; exit 4')
    assert (r["output"], r["exit_code"]) == ("1 in /tmp\n", 4)
    assert run(vercel_client, "sleep 100", timeout=1)["exit_code"] == 124
    assert run(vercel_client, "echo alive")["output"] == "alive\n"
    assert len(fake_vercel.requests_to("POST", "/v3/sandboxes")) == 1
    from tests.fakes.vercel import TOKEN

    assert files_containing(sbx_home, [TOKEN]) == []


def test_vercel_commands_are_checked_by_the_approval_policy(
    vercel_client: SandboxClient, fake_vercel: Any
) -> None:
    refused = run(vercel_client, "rm -rf /vercel/sandbox/data")
    assert refused["status"] == "approval_required"
    assert run(vercel_client, "rm -rf /")["status"] == "blocked"
    assert run(vercel_client, "echo 'rm -rf /' is only text")["exit_code"] == 0
    sent = [
        base64.b64decode(r["body"].get("data", "")).decode()
        for r in fake_vercel.requests_to("POST", "/stdin")
    ]
    assert any("is only text" in s for s in sent)
    assert not any("/vercel/sandbox/data" in s for s in sent)
