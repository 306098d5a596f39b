"""Fixtures for tests with workers: SBX_HOME, brokers (embedded and external Redis), workers."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, RedisProcess, WorkerProcess, redis_server, short_tmpdir, wait_until
from worker.settings import Settings


@pytest.fixture
def sbx_home() -> Iterator[Path]:
    """A fresh, short SBX_HOME; its embedded broker (if any) is stopped afterwards."""
    home = short_tmpdir("sbx-home-")
    yield home
    from worker.broker.embedded import EmbeddedBroker

    EmbeddedBroker(home).stop()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A fresh, short directory of the test's own (a sandbox's starting directory, files
    the test shares with a local sandbox), removed afterwards."""
    path = short_tmpdir("sbx-scratch-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def external_redis_url() -> Iterator[str]:
    """URL of a real redis-server started for this test session."""
    with redis_server() as url:
        yield url


@pytest.fixture(params=["embedded", "redis"])
def broker_url(request: pytest.FixtureRequest, sbx_home: Path) -> str | None:
    """``None`` for the embedded broker under ``sbx_home``, else an external Redis URL."""
    if request.param == "embedded":
        return None
    url: str = request.getfixturevalue("external_redis_url")
    # Each test gets its own database so queues and claims never mix.
    import redis

    redis.Redis.from_url(url).flushdb()
    return url


def shared_test_dirs() -> list[str]:
    """Directories tests share with sandboxes (pytest's temporary directories): bound
    into the local backend's jail, which otherwise has a /tmp of its own."""
    root = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
    return [str(root)] if root.is_dir() else []


def worker_env(home: Path, broker_url: str | None, **extra: str) -> dict[str, str]:
    """A worker's environment: ``SBX_HOME``, the broker, pytest's temporary directories
    visible in the local jail (``SBX_LOCAL_BINDS``), then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    env["SBX_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["SBX_LOCAL_BINDS"] = json.dumps(shared_test_dirs())
    if broker_url:
        env["SBX_BROKER_URL"] = broker_url
    env.update(extra)
    return env


def sbx(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The ``sbx`` CLI of ``home`` as a subprocess (``env``: more variables)."""
    return subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args],
        env=worker_env(home, None, **env), cwd=str(REPO),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def settings_for(home: Path, broker_url: str | None, **overrides: object) -> Settings:
    return Settings(home=home, broker_url=broker_url, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def own_redis() -> Iterator[RedisProcess]:
    """A redis-server of the test's own, for tests that stop, restart or empty their broker."""
    server = RedisProcess()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def start_worker(sbx_home: Path) -> Iterator[object]:
    """Factory: ``start_worker(broker_url, **env)`` runs a real worker process until test end."""
    workers: list[WorkerProcess] = []

    def start(broker_url: str | None = None, **extra: str) -> WorkerProcess:
        from process_registry.sessions import load_or_create_secret
        from worker.client import SandboxClient

        # The deployment's secret exists before its workers and clients start.
        load_or_create_secret(sbx_home / "secret.key")

        w = WorkerProcess(
            worker_env(sbx_home, broker_url, **extra), sbx_home / f"w{len(workers)}.log"
        )
        settings = settings_for(sbx_home, broker_url)
        w.start()
        workers.append(w)
        with SandboxClient(session_id="readiness", settings=settings) as client:
            wait_until(lambda: client.ping(timeout=1.0) or _dead(w), 60, "worker to answer")
        assert w.proc is not None and w.proc.poll() is None, w.log()
        return w

    yield start
    for w in workers:
        w.stop()


def _dead(w: WorkerProcess) -> bool:
    if w.proc is not None and w.proc.poll() is not None:
        raise AssertionError(f"worker exited early:\n{w.log()}")
    return False
