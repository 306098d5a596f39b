"""Structural approval bypasses, through a real worker: what the guard judges must be
what runs (the directory a command runs in, input typed into a pty's program)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from worker.client import SandboxClient


@pytest.fixture
def client(sbx_home: Path, start_worker: Any) -> Any:
    start_worker(None)
    c = SandboxClient(session_id="bypass", settings=settings_for(sbx_home, None))
    yield c
    c.close()


def call(client: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


def test_a_command_is_judged_in_the_directory_it_runs_in(client: SandboxClient) -> None:
    # `rm -rf *` in / is a recursive delete of /: hardline, whether the directory is the
    # call's workdir or the session's (set by an earlier cd). Nothing here may run.
    for workdir in ("/", "/usr/..", "/etc"):
        refused = call(client, "terminal", {"command": "rm -rf *", "workdir": workdir})
        assert refused["status"] == "blocked", (workdir, refused)
    assert call(client, "terminal", {"command": "cd /"})["cwd"] == "/"
    assert call(client, "terminal", {"command": "rm -rf *"})["status"] == "blocked"
    assert call(client, "terminal", {"command": "rm -rf *", "workdir": "usr"})["status"] == (
        "blocked"
    )


def test_a_once_grant_is_for_the_directory_it_was_asked_in(
    client: SandboxClient, tmp_path: Path
) -> None:
    approved, other = tmp_path / "approved", tmp_path / "other"
    for d in (approved, other):
        (d / "sub").mkdir(parents=True)
    ask = {"command": "rm -rf *", "workdir": str(approved)}
    refused = call(client, "terminal", ask)
    assert refused["status"] == "approval_required"
    # Asked elsewhere, the same text is another approval: a person approves one directory.
    elsewhere = call(client, "terminal", {"command": "rm -rf *", "workdir": str(other)})
    assert elsewhere["status"] == "approval_required"
    assert elsewhere["approval_id"] != refused["approval_id"]
    assert client.approve(refused["approval_id"], "once").status == "approved"
    # The grant is not spent in another directory...
    again = call(client, "terminal", {"command": "rm -rf *", "workdir": str(other)})
    assert again["status"] == "approval_required"
    assert (other / "sub").exists()
    # ...nor by the same text after a cd elsewhere...
    assert call(client, "terminal", {"command": f"cd {other}"})["exit_code"] == 0
    assert call(client, "terminal", {"command": "rm -rf *"})["status"] == "approval_required"
    assert (other / "sub").exists()
    # ...and runs where it was approved.
    assert call(client, "terminal", ask)["exit_code"] == 0
    assert not (approved / "sub").exists() and (other / "sub").exists()
