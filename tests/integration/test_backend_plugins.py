"""A backend from another distribution, registered through the ``sbx.environments``
entry point group, is treated exactly like a built-in one: doctor lists it with its
effective config, a real worker serves calls with it, its settings come from
``SBX_<NAME>_*`` like any backend's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, WorkerProcess, installed_distribution, wait_until
from worker.client import SandboxClient


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A directory holding an installed distribution whose entry point names the
    in-memory test backend (``tests.fakes.environment:MemoryEnvironment``)."""
    return installed_distribution(
        tmp_path / "plugins",
        "sbx-memory-backend",
        "[sbx.environments]\nmemory = tests.fakes.environment:MemoryEnvironment\n",
    )


def _env(home: Path, plugins: Path, **extra: str) -> dict[str, str]:
    env = worker_env(home, None, **extra)
    env["PYTHONPATH"] = f"{REPO}:{plugins}"
    return env


def test_doctor_lists_the_plugin_with_its_config(sbx_home: Path, plugin_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli.main", "doctor", "--json"],
        env=_env(sbx_home, plugin_path, SBX_MEMORY_CWD="/from-env"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["backends"]["memory"] == {"available": True, "reason": "ok"}
    assert report["configs"]["memory"] == {"type": "memory", "cwd": "/from-env"}


def test_a_worker_serves_calls_with_the_plugin_backend(
    sbx_home: Path, plugin_path: Path
) -> None:
    from process_registry.sessions import load_or_create_secret

    load_or_create_secret(sbx_home / "secret.key")
    worker = WorkerProcess(
        _env(sbx_home, plugin_path, SBX_BACKEND="memory", SBX_MEMORY_CWD="/from-env"),
        sbx_home / "w.log",
    )
    worker.start()
    try:
        settings = settings_for(sbx_home, None)
        with SandboxClient(session_id="plugin-user", settings=settings) as client:
            wait_until(lambda: client.ping(timeout=1.0), 60, "worker to answer")
            result = client.exec("echo through the plugin")
        assert (result.output, result.exit_code, result.cwd) == (
            "echo through the plugin",
            0,
            "/from-env",
        )
    finally:
        worker.stop()
