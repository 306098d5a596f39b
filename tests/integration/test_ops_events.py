"""Task events: Flower (run on 127.0.0.1 against a real worker started with --events) lists
the sbx task through its HTTP API, with no command, output or token in it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, free_port, require_module, wait_until
from tests.ops_support import OpsWorker
from worker.client import SandboxClient
from worker.protocol.tasks import TOOL_CALL_TASK
from worker.service.events import KEPT_OUT

require_module("flower", "pip install flower (the dev extra)")

SECRET = "xoxb-" + "1234567890-" * 2 + "Ab3dEf6hIj9kLm2nOp5qRs8t"
MARKER = "event-output-marker-5150"


@pytest.fixture
def flower(external_redis_url: str, tmp_path: Path) -> Iterator[str]:
    """Flower on 127.0.0.1 watching the broker; yields its base URL."""
    port = free_port()
    env = {k: v for k, v in worker_env(tmp_path, external_redis_url).items()}
    env["FLOWER_UNAUTHENTICATED_API"] = "true"  # its API on loopback, for this test only
    log = open(tmp_path / "flower.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "--broker", external_redis_url, "flower",
         "--address=127.0.0.1", f"--port={port}", "--persistent=False"],
        env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError((tmp_path / "flower.log").read_text())
        try:
            return _get(f"{base}/healthcheck") == "OK"
        except OSError:
            return False

    try:
        wait_until(up, 60, "Flower to serve")
        yield base
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_flower_reads_the_sbx_task_without_its_payload(
    sbx_home: Path, external_redis_url: str, flower: str
) -> None:
    from process_registry.sessions import load_or_create_secret

    redis.Redis.from_url(external_redis_url).flushdb()
    load_or_create_secret(sbx_home / "secret.key")
    worker = OpsWorker(worker_env(sbx_home, external_redis_url), sbx_home, "--events").start()
    try:
        worker.wait_healthy()
        session = f"events-{uuid.uuid4().hex}"
        settings = settings_for(sbx_home, external_redis_url)
        seen: dict[str, Any] = {}
        with SandboxClient(session_id=session, settings=settings) as client:

            def listed(call_id: str) -> bool:
                info = json.loads(_get(f"{flower}/api/tasks")).get(call_id, {})
                if info.get("state") != "SUCCESS":
                    return False
                seen.update(info)
                return True

            def flower_has_a_call() -> bool:
                # Flower subscribes to events once it runs: a call before that is not seen.
                call_id = uuid.uuid4().hex
                command = f"T={SECRET}; echo {MARKER}"
                raw = client.tool_call("terminal", {"command": command}, call_id=call_id)
                out = json.loads(raw)
                assert MARKER in out["output"]
                try:
                    wait_until(lambda: listed(call_id), 10, "Flower to list the call")
                except AssertionError:
                    return False
                return True

            wait_until(flower_has_a_call, 90, "Flower to list an sbx call as SUCCESS")
        assert seen["name"] == TOOL_CALL_TASK
        assert seen["worker"].startswith("sbx-")
        assert seen["received"] and seen["started"] and seen["succeeded"]
        assert seen["result"] == KEPT_OUT
        dumped = json.dumps(json.loads(_get(f"{flower}/api/tasks")))
        for needle in (SECRET, MARKER, session, "echo"):
            assert needle not in dumped, needle
    finally:
        assert worker.stop() == 0
