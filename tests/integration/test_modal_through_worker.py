"""The modal backend end to end: a real worker process, the real SDK, the fake Modal, approval."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.modal import TOKEN_ID, TOKEN_SECRET, FakeModal
from tests.fixtures_workers import settings_for
from worker.client import SandboxClient


@pytest.fixture
def modal_client(fake_modal: FakeModal, sbx_home: Path, start_worker: Any) -> Iterator[Any]:
    start_worker(
        None,
        SBX_BACKEND="modal",
        SBX_MODAL_APP_NAME="sbx-worker-test",
        SBX_MODAL_KILL_GRACE="0.5",
        # The SDK's own variables: the worker's SDK finds the fake and its credentials.
        MODAL_SERVER_URL=fake_modal.server_url,
        MODAL_TOKEN_ID=TOKEN_ID,
        MODAL_TOKEN_SECRET=TOKEN_SECRET,
    )
    client = SandboxClient(session_id="mdw", backend="modal", settings=settings_for(sbx_home, None))
    yield client
    client.close()
    for sandbox in fake_modal.sandboxes_of_session("mdw"):
        fake_modal.terminate_behind_the_back(sandbox.sandbox_id)


def run(client: SandboxClient, command: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command, **extra}))
    return result


def test_modal_session_through_worker(modal_client: SandboxClient, fake_modal: FakeModal) -> None:
    r = run(modal_client, "cd /tmp && export IN_MODAL=1 && hostname")
    sandboxes = fake_modal.sandboxes_of_session("mdw")
    assert len(sandboxes) == 1 and r["exit_code"] == 0 and r["cwd"] == "/tmp"
    assert r["output"] == sandboxes[0].sandbox_id + "\n"
    r = run(modal_client, 'echo "$IN_MODAL in $PWD"; exit 4')
    assert (r["output"], r["exit_code"]) == ("1 in /tmp\n", 4)
    r = run(modal_client, "sleep 100", timeout=1)
    assert r["exit_code"] == 124
    assert run(modal_client, "echo alive")["output"] == "alive\n"
    # The worker's credentials never reach the sandbox.
    assert "MODAL_TOKEN" not in run(modal_client, "env")["output"]


def test_modal_commands_are_checked_by_the_approval_policy(
    modal_client: SandboxClient, fake_modal: FakeModal
) -> None:
    refused = run(modal_client, "rm -rf /workspace/data")
    assert refused["status"] == "approval_required"
    assert run(modal_client, "rm -rf /")["status"] == "blocked"
    assert run(modal_client, "echo 'rm -rf /' is only text")["exit_code"] == 0
    # What the session shell was sent: the harmless command, never the refused ones.
    sent = fake_modal.stdin_sent()
    assert b"is only text" in sent and b"/workspace/data" not in sent


def test_modal_pty_through_worker(modal_client: SandboxClient) -> None:
    # Background: typed into through the process tool, its output and status kept.
    p = modal_client.start('read line; echo "got:$line"; test -t 0 && echo tty', pty=True)
    assert modal_client.write(p.process_id, "hello\n").bytes_written == 6
    done = modal_client.wait(p.process_id, timeout=60)
    assert (done.status, done.exit_code) == ("exited", 0)
    out = modal_client.logs(p.process_id).text
    assert "got:hello" in out and "tty" in out
    # Foreground: the command's stdout is a terminal.
    r = run(modal_client, "test -t 1 && echo on-a-tty", pty=True)
    assert (r["output"], r["exit_code"]) == ("on-a-tty\r\n", 0)
