"""deploy/compose.yaml: validated by docker-compose and brought up for real -- Redis with a
healthcheck, two workers that serve a call and answer their health probe, Flower listing
the call, everything removed afterwards."""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, free_port, require, wait_until

COMPOSE_FILE = REPO / "deploy" / "compose.yaml"


def compose_cli() -> list[str]:
    """``docker-compose`` (Debian's), else the ``docker compose`` plugin."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    require(plugin.returncode == 0, "neither docker-compose nor docker compose is installed")
    return ["docker", "compose"]


def run_compose(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [*compose_cli(), "-f", str(COMPOSE_FILE), *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"compose {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    return {**env, "SBX_SECRET_KEY": secrets.token_urlsafe(32),
            "SBX_REDIS_PASSWORD": secrets.token_hex(16), **extra}  # fmt: skip


def test_the_compose_file_is_valid_and_says_what_it_needs() -> None:
    config = yaml.safe_load(run_compose(base_env(), "--profile", "flower", "config"))
    services = config["services"]
    assert set(services) == {"redis", "worker", "flower"}
    worker = services["worker"]
    assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["redis"]["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
    assert worker["stop_signal"] == "SIGTERM"
    grace = float(worker["environment"]["SBX_SHUTDOWN_GRACE"])
    assert float(worker["stop_grace_period"].rstrip("s")) > grace
    assert worker["read_only"] is True and worker["cap_drop"] == ["ALL"]
    assert "ports" not in worker and "ports" not in services["redis"]
    assert services["flower"]["ports"][0].startswith("127.0.0.1:") or (
        services["flower"]["ports"][0].get("host_ip") == "127.0.0.1"  # compose v2's form
    )
    # Without the shared secrets it refuses to start, naming what is missing.
    env = {k: v for k, v in base_env().items() if k != "SBX_SECRET_KEY"}
    done = subprocess.run([*compose_cli(), "-f", str(COMPOSE_FILE), "config"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0 and "SBX_SECRET_KEY" in done.stderr


@pytest.fixture
def stack(sbx_image: str, redis_image: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    project = f"sbxtest{uuid.uuid4().hex[:8]}"
    env = base_env(SBX_IMAGE=sbx_image, SBX_REDIS_IMAGE=redis_image,
                   SBX_FLOWER_PORT=str(free_port()))  # fmt: skip
    args = ["-p", project, "--profile", "flower"]
    try:
        run_compose(env, *args, "up", "-d", "--scale", "worker=2", timeout=600)
        yield env, args
    finally:
        run_compose(env, *args, "down", "-v", "--timeout", "60", timeout=600)


def test_the_stack_comes_up_and_serves_a_call(stack: tuple[dict[str, str], list[str]]) -> None:
    env, args = stack

    def worker_health(index: int) -> dict[str, Any]:
        done = subprocess.run(
            [*compose_cli(), "-f", str(COMPOSE_FILE), *args, "exec", "-T", f"--index={index}",
             "worker", "sbx", "health", "--json"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        try:
            report: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            return {"ok": False}
        return report

    for index in (1, 2):
        wait_until(functools.partial(_ok, worker_health, index), 120, f"worker {index} to answer")
    out = run_compose(env, *args, "exec", "-T", "worker", "sbx", "exec", "--",
                      "echo served-by-compose")  # fmt: skip
    assert out == "served-by-compose\n"

    def flower_saw_it() -> bool:
        try:
            url = f"http://127.0.0.1:{env['SBX_FLOWER_PORT']}/api/tasks"
            with urllib.request.urlopen(url, timeout=5) as r:
                tasks = json.loads(r.read())
        except OSError:
            return False
        return any(t.get("name") == "sbx.tool_call" for t in tasks.values())

    # Flower started with the stack; a call it missed while subscribing is sent again.
    def listed() -> bool:
        if flower_saw_it():
            return True
        run_compose(env, *args, "exec", "-T", "worker", "sbx", "exec", "--", "true")
        return flower_saw_it()

    wait_until(listed, 120, "Flower to list an sbx call")


def _ok(health: Any, index: int) -> bool:
    return bool(health(index)["ok"])
