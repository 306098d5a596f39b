"""A session's container stopped (``docker kill``) or removed (``docker rm -f``) from outside,
through a real worker and a real engine: every call that needs the container brings it
back, and the next command's result says what was lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_backends import docker_session_client
from tests.helpers import wait_until
from worker.client import SandboxClient

SESSION = "dloss"


@pytest.fixture
def api(docker_client_ready: Any) -> Any:
    return docker_client_ready.api


@pytest.fixture
def client(api: Any, sbx_home: Path, start_worker: Any) -> Iterator[SandboxClient]:
    with docker_session_client(api, sbx_home, start_worker, SESSION) as c:
        yield c


def _container(api: Any) -> str:
    (found,) = api.containers(all=True, filters={"label": ["sbx=1", f"sbx.session={SESSION}"]})
    return str(found["Id"])


def _end(api: Any, how: str) -> None:
    """End the session's container from outside, as an operator or the engine would."""
    if how == "kill":
        api.kill(_container(api))
        api.wait(_container(api))  # stopped, not removed
    else:
        api.remove_container(_container(api), force=True)


def _call(client: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


def test_a_stopped_container_is_started_and_the_call_says_what_was_lost(
    client: SandboxClient, api: Any
) -> None:
    first = _call(client, "terminal", {"command": "cd /tmp && echo kept > f && export A=1"})
    assert first["exit_code"] == 0
    _end(api, "kill")
    r = _call(client, "terminal", {"command": 'echo "A=$A"; ls /tmp/f'})
    # The file lived in the container's tmpfs: gone with the stop. The model is told.
    assert "container had stopped and was started again" in r["output"], r
    assert "processes from before are gone" in r["output"]
    assert "/tmp" in r["output"].splitlines()[0]
    assert "A=1" in r["output"] and r["exit_code"] != 0  # cwd and variables restored
    assert r["error"] is not None and "restarted" in r["error"]
    again = _call(client, "terminal", {"command": "echo plain"})
    assert again["output"] == "plain\n" and again["error"] is None  # said once


@pytest.mark.parametrize("how", ["kill", "rm"])
def test_calls_without_the_shell_bring_the_container_back(
    client: SandboxClient, api: Any, how: str
) -> None:
    assert _call(client, "terminal", {"command": "cd /tmp"})["exit_code"] == 0
    _end(api, how)
    wrote = _call(client, "write_file", {"path": "/tmp/w.txt", "content": "written\n"})
    assert wrote == {"path": "/tmp/w.txt", "bytes_written": 8}
    read = _call(client, "read_file", {"path": "/tmp/w.txt"})
    assert read["content"] == "written\n", read

    _end(api, how)
    info = client.upload("/tmp/u.bin", b"\x00\xffbytes")
    assert info.size == 7
    assert client.download("/tmp/u.bin") == b"\x00\xffbytes"

    _end(api, how)
    started = _call(client, "terminal", {"command": "echo begun", "background": True})
    assert started.get("status") == "running", started
    done = _call(client, "process", {"action": "wait", "process_id": started["process_id"]})
    assert (done["status"], done["output_tail"]) == ("exited", "begun\n"), done

    # The next command hears what happened to the container before.
    r = _call(client, "terminal", {"command": "pwd"})
    assert r["output"].startswith("[sbx: the session's container"), r
    assert r["output"].endswith("/tmp\n")


def test_a_process_of_a_stopped_container_is_lost_and_says_why(
    client: SandboxClient, api: Any
) -> None:
    started = _call(client, "terminal", {"command": "echo begun; sleep 300", "background": True})
    process_id = started["process_id"]
    wait_until(
        lambda: (
            "begun"
            in _call(client, "process", {"action": "poll", "process_id": process_id})["output_tail"]
        ),
        60,
        "the process's first output",
    )
    _end(api, "kill")
    done = _call(client, "process", {"action": "wait", "process_id": process_id})
    assert done["status"] == "lost", done
    # Why there is no output: the container, not a FIFO planted at the output path.
    assert done["output_tail"] == "[output unreadable: its sandbox is gone (stopped or removed)]"
