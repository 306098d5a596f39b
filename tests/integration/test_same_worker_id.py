"""A worker restarted under the same ``host:pid`` carries its sessions' state over.

In a container, ``tini -- sbx worker`` gives the worker the same pid on every
restart, and the hostname stays: the new process has the old one's worker id.
Here a real ``sbx worker`` runs as pid 2 of its own pid namespace (``unshare``,
then ``tini``), is SIGKILLed and started again the same way, on a real
redis-server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.fixtures_fleet import Fleet
from tests.helpers import REPO, RedisProcess, require, wait_until
from worker.protocol.tasks import PING_TASK, own_queue_name

PID_IN_NAMESPACE = 2
"""The worker's pid under ``unshare --pid --fork tini``: tini is 1, its child 2."""


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    require(os.geteuid() == 0, "a new pid namespace needs root")
    require(bool(shutil.which("unshare")) and bool(shutil.which("tini")), "needs unshare, tini")
    server = RedisProcess()
    server.start()
    made = Fleet(1, server.url, None, SBX_LOST_AFTER="3", SBX_HEARTBEAT_INTERVAL="0.3")
    try:
        yield made
    finally:
        made.close()
        server.stop()


class NamespacedWorker:
    """Worker 0 of ``fleet``, run as pid 2 of a new pid namespace."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.fleet.homes[0] / "worker.log", "ab")  # noqa: SIM115 (the child's)
        namespace = ["unshare", "--pid", "--fork", "--mount-proc", "tini", "-s", "--"]
        argv = [*namespace, sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "INFO"]
        self.proc = subprocess.Popen(
            argv, env=self.fleet.env(0), cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        probe = self.fleet.client("readiness")
        queue = own_queue_name(self.fleet.settings().queue, pid=PID_IN_NAMESPACE)

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(self.log())
            return probe.ask(PING_TASK, [], 1.0, queue=queue) == "pong"

        wait_until(ready, 90, "the namespaced worker to answer")

    def kill(self) -> None:
        """SIGKILL the worker and its namespace, as a crash of the container would."""
        if self.proc is None or self.proc.poll() is not None:
            return
        # tini is the namespace's init: killing it kills everything in the namespace.
        for child in psutil.Process(self.proc.pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(signal.SIGKILL)
        self.proc.kill()
        self.proc.wait(timeout=30)

    def log(self) -> str:
        return (self.fleet.homes[0] / "worker.log").read_text(errors="replace")


def run(c: Any, command: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(c.tool_call("terminal", {"command": command}, wait=60))
    return result


def test_a_restart_under_the_same_worker_id_restores_cwd_and_variables(
    fleet: Fleet, tmp_path: Any
) -> None:
    worker = NamespacedWorker(fleet)
    try:
        worker.start()
        c = fleet.client("same-id")
        assert run(c, f"export SAME_ID_VAR=kept; cd {tmp_path}")["exit_code"] == 0
        worker.kill()
        worker.start()  # the same host:pid as before
        answer = run(c, 'echo "$PWD $SAME_ID_VAR"')
    finally:
        worker.kill()
    assert answer["output"] == f"{tmp_path} kept\n", answer
    assert answer.get("session_moved") is True, answer
