"""A whole sbx deployment for a test module: a home, its secret, a real worker process.

The test process itself acts as a platform machine of that deployment (``SBX_HOME``
points at the home while the deployment runs), so code that builds its client from
the environment -- the inspect provider, ``sbx mcp`` -- finds the same broker and secret.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from process_registry.sessions import SessionSigner, load_or_create_secret
from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import WorkerProcess, short_tmpdir, wait_until
from worker.client import SandboxClient
from worker.settings import get_settings

READY_WAIT = 60.0  # an upper bound for the worker to answer, not a timing assertion


@dataclass
class Deployment:
    home: Path
    worker: WorkerProcess
    workdir: Path
    """Where the local backend's sessions start."""

    @property
    def worker_id(self) -> str:
        assert self.worker.proc is not None
        return f"{socket.gethostname()}:{self.worker.proc.pid}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a platform-side process (``sbx mcp``) of this deployment."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
        return {**env, "SBX_HOME": str(self.home), **extra}

    def token(self, session_id: str) -> str:
        return SessionSigner(load_or_create_secret(self.home / "secret.key")).token(session_id)

    def client(self, session_id: str, backend: str | None = None) -> SandboxClient:
        return SandboxClient(
            session_id=session_id, backend=backend, settings=settings_for(self.home, None)
        )


@contextlib.contextmanager
def deployment(
    config: dict[str, Any] | None = None, **worker_settings: str
) -> Iterator[Deployment]:
    """A running deployment (embedded broker; ``config`` its config.yaml, mode 0600);
    everything it started is stopped after."""
    home = short_tmpdir("sbx-int-")
    # Outside the home: no jail binds anything of the worker's private state.
    workdir = short_tmpdir("sbx-work-")
    load_or_create_secret(home / "secret.key")
    if config is not None:
        path = home / "config.yaml"
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config))
    env = worker_env(home, None, SBX_LOCAL_CWD=str(workdir), **worker_settings)
    worker = WorkerProcess(env, home / "worker.log")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in [k for k in os.environ if k.startswith("SBX_")]:
                patch.delenv(name)
            patch.setenv("SBX_HOME", str(home))
            get_settings.cache_clear()
            worker.start()
            with SandboxClient(session_id="readiness", settings=settings_for(home, None)) as c:
                wait_until(lambda: c.ping(timeout=1.0) or _exited(worker), READY_WAIT,
                           "the worker to answer")  # fmt: skip
            yield Deployment(home, worker, workdir)
    finally:
        get_settings.cache_clear()
        worker.stop()
        from worker.broker.embedded import EmbeddedBroker

        EmbeddedBroker(home).stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _exited(worker: WorkerProcess) -> bool:
    if worker.proc is not None and worker.proc.poll() is not None:
        raise AssertionError(f"the worker exited early:\n{worker.log()}")
    return False


def remove_containers(worker_id: str) -> None:
    """Remove the docker containers the deployment's worker made (it leaves them for the
    next worker when it stops)."""
    import docker

    from environments.backends.docker.orphans import reap_orphans

    reap_orphans(-1, client=docker.from_env(), labels={"sbx.worker": worker_id})
