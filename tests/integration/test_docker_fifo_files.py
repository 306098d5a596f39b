"""A FIFO where sbx reads a file in a container, through a real worker and a real engine.

Opening a FIFO blocks until something writes to it: a helper that opened one held the
worker's thread (a model's ``mkfifo`` + ``read_file``, or a process's output file
replaced by one and then ``process log``, wedged the call until its deadline). Such
files are refused, never opened.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_backends import docker_session_client
from worker.client import FileError, SandboxClient

SESSION = "dfifo"
WAIT = 120.0  # far beyond any answer; a call that never answers fails the test instead


@pytest.fixture
def client(docker_client_ready: Any, sbx_home: Path, start_worker: Any) -> Iterator[SandboxClient]:
    api = docker_client_ready.api
    with docker_session_client(api, sbx_home, start_worker, SESSION) as c:
        yield c


def _call(client: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args, wait=WAIT))
    return result


def test_reading_a_fifo_is_refused_at_once(client: SandboxClient) -> None:
    made = _call(client, "terminal", {"command": "mkfifo /tmp/fifo && ln -s fifo /tmp/link"})
    assert made["exit_code"] == 0
    for path in ("/tmp/fifo", "/tmp/link"):
        r = _call(client, "read_file", {"path": path})
        assert r["status"] == "invalid" and "not a regular file" in r["error"], r
    with pytest.raises(FileError) as refused:
        client.download("/tmp/fifo")
    assert refused.value.status == "invalid"
    assert _call(client, "terminal", {"command": "echo usable"})["output"] == "usable\n"


def test_an_output_file_replaced_by_a_fifo_is_refused(client: SandboxClient) -> None:
    started = _call(
        client,
        "terminal",
        {"command": "while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done", "background": True},
    )
    process_id = started["process_id"]
    out = f"/tmp/sbx-{process_id}.out"
    assert _call(client, "terminal", {"command": f"rm -f {out} && mkfifo {out}"})["exit_code"] == 0
    log = _call(client, "process", {"action": "log", "process_id": process_id})
    assert log["status"] == "error" and "not a regular file" in log["error"], log
    assert _call(client, "terminal", {"command": "touch /tmp/go"})["exit_code"] == 0
    done = _call(client, "process", {"action": "wait", "process_id": process_id})
    assert done["status"] == "exited", done
    assert "not a regular file" in done["output_tail"]
