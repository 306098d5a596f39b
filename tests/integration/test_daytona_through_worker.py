"""The daytona backend end to end: a real worker process, the real SDK, the fake Daytona.

The worker gets its Daytona settings the way a deployment gives them
(``SBX_DAYTONA_*``); the approval policy applies to sandbox commands as
everywhere; nothing the worker writes under SBX_HOME holds the API key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import files_containing
from worker.client import SandboxClient

pytest.importorskip("daytona")

from tests.fakes.daytona import FakeDaytona

SESSION = "dayt"


@pytest.fixture
def daytona_client(
    daytona_fake: FakeDaytona, sbx_home: Path, start_worker: Any
) -> Iterator[SandboxClient]:
    start_worker(
        None,
        SBX_DAYTONA_API_KEY=daytona_fake.token,
        SBX_DAYTONA_API_URL=daytona_fake.api_url,
        SBX_DAYTONA_TARGET="us",
        SBX_DAYTONA_KILL_GRACE="0.5",
        SBX_ALLOWED_BACKENDS="local,daytona",
    )
    client = SandboxClient(
        session_id=SESSION, backend="daytona", settings=settings_for(sbx_home, None)
    )
    yield client
    client.close()
    for sandbox in daytona_fake.store.matching({"sbx.session": SESSION}):
        daytona_fake.delete(sandbox.id)


def run(client: SandboxClient, command: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command, **extra}))
    return result


def test_daytona_session_through_worker(
    daytona_client: SandboxClient, daytona_fake: FakeDaytona, sbx_home: Path
) -> None:
    r = run(daytona_client, "cd /tmp && export IN_DAYTONA=1 && pwd")
    assert (r["output"], r["exit_code"], r["cwd"]) == ("/tmp\n", 0, "/tmp")
    r = run(daytona_client, 'echo "$IN_DAYTONA in $PWD"; exit 4')
    assert (r["output"], r["exit_code"]) == ("1 in /tmp\n", 4)
    r = run(daytona_client, "sleep 4711", timeout=1)
    assert r["exit_code"] == 124
    assert run(daytona_client, "pgrep -f 'sleep 4711' || echo none")["output"] == "none\n"
    assert run(daytona_client, "echo alive")["output"] == "alive\n"
    [sandbox] = daytona_fake.store.matching({"sbx.session": SESSION})
    assert sandbox.network_block_all and sandbox.labels["sbx"] == "1"
    # The key is the worker's: nothing it wrote under SBX_HOME holds it.
    assert files_containing(sbx_home, [daytona_fake.token]) == []


def test_daytona_commands_are_checked_by_the_approval_policy(
    daytona_client: SandboxClient,
) -> None:
    refused = run(daytona_client, "rm -rf /home/daytona/data")
    assert refused["status"] == "approval_required"
    assert run(daytona_client, "rm -rf /")["status"] == "blocked"
    assert run(daytona_client, "echo 'rm -rf /' is only text")["exit_code"] == 0
