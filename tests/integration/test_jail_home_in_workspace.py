"""A real worker whose ``SBX_HOME`` lies inside the local backend's workspace
(``SBX_LOCAL_CWD=<ws>``, ``SBX_HOME=<ws>/state/.sbx``), attacked from a model's
``terminal`` calls: the key is masked, and the directory holding it cannot be moved
out from under the mask (the next jail, after the shell is killed, would have shown
it), nor removed. The worker keeps serving afterwards: its state stayed put.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_backends import require_jail
from tests.fixtures_workers import settings_for
from tests.helpers import short_tmpdir
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient


@pytest.fixture
def workspace() -> Iterator[Path]:
    path = short_tmpdir("sbx-ws-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sbx_home(workspace: Path) -> Iterator[Path]:
    """Overrides the worker fixtures' SBX_HOME: inside the workspace."""
    home = workspace / "state" / ".sbx"
    home.mkdir(parents=True)
    yield home
    EmbeddedBroker(home).stop()


def run(c: SandboxClient, command: str) -> str:
    result: dict[str, Any] = json.loads(c.tool_call("terminal", {"command": command}))
    assert "output" in result, result  # not held for approval: these tests are about the jail
    return str(result["output"])


def test_sbx_home_inside_the_workspace_can_be_neither_read_nor_moved(
    start_worker: Any, sbx_home: Path, workspace: Path
) -> None:
    require_jail()
    # The approval policy asks before a command touches SBX_HOME (state/.sbx here); off,
    # only the jail stands between the command and the worker's state.
    start_worker(None, SBX_LOCAL_BINDS="[]", SBX_LOCAL_CWD=str(workspace), SBX_APPROVAL_MODE="off")
    key = (sbx_home / "secret.key").read_text().strip()
    with SandboxClient(session_id="mover", settings=settings_for(sbx_home, None)) as c:
        out = run(c, "cat state/.sbx/secret.key; mv state moved && echo MOVED; "
                     "mv state/.sbx state/x && echo MOVED; rmdir state && echo GONE; "
                     "kill -9 $$")  # fmt: skip
        assert "No such file" in out and "busy" in out, out
        assert "MOVED" not in out and "GONE" not in out and key not in out
        # A fresh jail (the shell was killed) shows no more than the first one did.
        out = run(c, "cat moved/.sbx/secret.key state/.sbx/secret.key")
        assert key not in out and out.count("No such file") == 2, out
        assert run(c, "ls -A . state/.sbx; find . -name secret.key") == ".:\nstate\n\nstate/.sbx:\n"
    assert (sbx_home / "secret.key").read_text().strip() == key
    assert not (workspace / "moved").exists()
    # The worker's state is where it was: it still answers a new session.
    with SandboxClient(session_id="after", settings=settings_for(sbx_home, None)) as c:
        assert run(c, "echo still-serving") == "still-serving\n"
