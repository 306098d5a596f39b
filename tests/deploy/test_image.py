"""The worker image (deploy/Dockerfile), built for real: non-root, no secret inside, a
healthcheck that passes, a real call through a worker container, a graceful stop."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import docker
from tests.helpers import RedisProcess, short_tmpdir, wait_until
from worker.client import SandboxClient
from worker.settings import Settings


def test_the_image_runs_sbx_worker_as_a_non_root_user_with_no_secret(sbx_image: str) -> None:
    config = json.loads(docker("image", "inspect", sbx_image))[0]["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["tini", "--", "sbx", "worker"]
    assert config["StopSignal"] == "SIGTERM"
    assert config["Healthcheck"]["Test"][1:3] == ["sbx", "health"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["SBX_HOME"] == "/var/lib/sbx" and env["SBX_LOG_FORMAT"] == "json"
    assert not [k for k in env if any(w in k for w in ("SECRET", "TOKEN", "PASSWORD"))]
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", sbx_image)
    assert "SBX_SECRET_KEY" not in history
    listing = docker("run", "--rm", "--entrypoint", "sh", sbx_image, "-c",
                     "id -u; ls -A /var/lib/sbx; stat -c %a /var/lib/sbx")  # fmt: skip
    assert listing.split() == ["10001", "700"]  # the state directory is empty and private


@pytest.fixture
def redis_url() -> Iterator[str]:
    server = RedisProcess()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_a_worker_container_serves_calls_turns_healthy_and_stops_gracefully(
    sbx_image: str, redis_url: str
) -> None:
    key = secrets.token_urlsafe(32)
    name = f"sbx-image-test-{uuid.uuid4().hex[:8]}"
    # Host networking: this engine runs without a bridge; Redis listens on 127.0.0.1.
    # The root file system is read-only and every capability dropped, as in Kubernetes.
    docker("run", "-d", "--name", name, "--network", "host", "--read-only",
           "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "--health-interval", "2s", "--health-start-period", "60s",
           "-e", f"SBX_BROKER_URL={redis_url}", "-e", f"SBX_SECRET_KEY={key}",
           "-e", "SBX_SHUTDOWN_GRACE=3", sbx_image)  # fmt: skip
    home = short_tmpdir("sbx-image-client-")
    try:
        settings = Settings(home=home, broker_url=redis_url, secret_key=key)  # type: ignore[arg-type]
        with SandboxClient(session_id="image-test", settings=settings) as client:
            wait_until(lambda: client.ping(timeout=2), 120, "the container's worker to answer")
            ran = json.loads(client.tool_call("terminal", {"command": "id -u; echo from-image"}))
            assert ran["output"] == "10001\nfrom-image\n", ran

            def state() -> Any:
                return json.loads(docker("inspect", name))[0]["State"]

            wait_until(lambda: state()["Health"]["Status"] == "healthy", 120,
                       "Docker to call the container healthy")  # fmt: skip

            answers: list[dict[str, Any]] = []
            call_id = uuid.uuid4().hex
            def long_call() -> None:
                raw = client.tool_call("terminal", {"command": "sleep 600"}, call_id=call_id)
                answers.append(json.loads(raw))

            running = threading.Thread(target=long_call)
            running.start()
            wait_until(lambda: _running_calls(name) == 1, 60, "the long call to run")
            docker("stop", "-t", "60", name, timeout=120)
            running.join(60)
        assert state()["ExitCode"] == 0
        assert (answers[0]["exit_code"], answers[0]["status"]) == (130, "cancelled")
        done = subprocess.run(["docker", "logs", name], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        logs = done.stdout + done.stderr
        assert '"logger": "celery.apps.worker"' in logs  # its JSON logs, without payloads
        assert "from-image" not in logs and key not in logs
    finally:
        docker("rm", "-f", name, check=False)
        _rmtree(home)


def _running_calls(container: str) -> int:
    report = docker("exec", container, "sbx", "health", "--json", check=False)
    try:
        return int(json.loads(report)["workers"][0].get("running", 0))
    except (ValueError, KeyError, IndexError):
        return 0


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
