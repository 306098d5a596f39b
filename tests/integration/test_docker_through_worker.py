"""The docker backend end to end: a real worker, a real engine, approval enforced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from worker.client import SandboxClient

IMAGE = "sbx-test-busybox:latest"


@pytest.fixture
def docker_client(docker_client_ready: Any, sbx_home: Path, start_worker: Any) -> Any:
    start_worker(None, SBX_DOCKER_IMAGE=IMAGE, SBX_ALLOWED_BACKENDS="local,docker")
    client = SandboxClient(
        session_id="dock", backend="docker", settings=settings_for(sbx_home, None)
    )
    yield client
    client.close()
    api = docker_client_ready.api  # type: ignore[attr-defined]
    for c in api.containers(all=True, filters={"label": ["sbx=1", "sbx.session=dock"]}):
        api.remove_container(c["Id"], force=True)


def run(client: SandboxClient, command: str, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", {"command": command, **extra}))
    return result


def test_docker_session_through_worker(docker_client: SandboxClient) -> None:
    r = run(docker_client, "cd /tmp && export IN_DOCKER=1 && id -u")
    assert (r["output"], r["exit_code"], r["cwd"]) == ("65534\n", 0, "/tmp")
    r = run(docker_client, 'echo "$IN_DOCKER in $PWD"; exit 4')
    assert (r["output"], r["exit_code"]) == ("1 in /tmp\n", 4)
    r = run(docker_client, "sleep 100", timeout=1)
    assert r["exit_code"] == 124
    assert run(docker_client, "echo alive")["output"] == "alive\n"


def test_containers_are_checked_by_the_approval_policy(docker_client: SandboxClient) -> None:
    refused = run(docker_client, "rm -rf /workspace/data")
    assert refused["status"] == "approval_required"
    assert run(docker_client, "rm -rf /")["status"] == "blocked"
    assert run(docker_client, "echo 'rm -rf /' is only text")["exit_code"] == 0


def test_background_work_goes_on_after_the_container_died(
    docker_client: SandboxClient, docker_client_ready: Any
) -> None:
    """A container that died (removed, OOM-killed, the engine restarted) under a running
    process: the process gets its ``lost`` receipt, and later background starts need no
    foreground command first -- at most the first one fails, saying so."""
    running = docker_client.start("echo up; exec sleep 300")
    api = docker_client_ready.api
    (container,) = api.containers(filters={"label": ["sbx=1", "sbx.session=dock"]})
    api.remove_container(container["Id"], force=True)
    final = docker_client.wait(running.process_id, timeout=60)
    assert (final.status, final.exit_code) == ("lost", None)
    receipt = docker_client.receipt(running.process_id)
    assert "not a regular file" not in receipt.output, receipt.output
    answers = [
        json.loads(docker_client.tool_call("terminal", {"command": "exit 4", "background": True}))
        for _ in range(2)
    ]
    first, second = answers
    if "error" in first:  # the call that met the dead container says so, as a tool error
        assert first["status"] == "error" and "Tool execution failed" not in first["error"]
    assert second["status"] == "running", answers
    done = docker_client.wait(second["process_id"], timeout=60)
    assert (done.status, done.exit_code) == ("exited", 4)
