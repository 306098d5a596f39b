"""An ssh host that cannot be reached for a while, through a real worker and a real sshd.

The host outlives its connections: a background process started there keeps running
while sshd is down, so sbx must keep tracking it (never report it ended, never write
its receipt) and be able to kill it once the host answers again.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil

from tests.fixtures_workers import settings_for
from tests.helpers import (
    WorkerProcess,
    call_in_background,
    end_sleeps,
    sleeping,
    unique_sleep_seconds,
    wait_until,
)
from tests.sshd import SSHServer, drop_connections, worker_ssh_env
from worker.client import SandboxClient


def _ssh_env(server: SSHServer) -> dict[str, str]:
    return {**worker_ssh_env(server), "SBX_ALLOWED_BACKENDS": "ssh", "SBX_SSH_CONNECT_TIMEOUT": "5"}


def _kill_sshd(server: SSHServer) -> None:
    """SIGKILL the listening sshd and every connection it serves: the host is unreachable."""
    listener = psutil.Process(server.pid)
    connections = listener.children(recursive=True)
    listener.kill()  # first: no new connection is accepted while the others go
    for child in connections:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    listener.wait(timeout=30)


def _call(client: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


def test_background_process_survives_an_unreachable_host(
    own_sshd: SSHServer, sbx_home: Path, start_worker: Any
) -> None:
    worker: WorkerProcess = start_worker(None, **_ssh_env(own_sshd))
    client = SandboxClient(
        session_id="ssh-outage", backend="ssh", settings=settings_for(sbx_home, None)
    )
    seconds = unique_sleep_seconds()
    restarted: subprocess.Popen[bytes] | None = None
    try:
        started = _call(client, "terminal", {"command": f"sleep {seconds}", "background": True})
        process_id = started["process_id"]
        wait_until(lambda: sleeping(seconds), 60, "the background sleep to run on the host")

        _kill_sshd(own_sshd)

        # The worker's watcher meets the outage: it says it cannot ask the host (one
        # log line per outage) -- or, wrongly, takes the process for ended.
        def outage_met() -> bool:
            if f"cannot tell whether {process_id} still runs" in worker.log():
                return True
            poll = _call(client, "process", {"action": "poll", "process_id": process_id})
            return bool(poll["status"] != "running")

        wait_until(outage_met, 60, "the watcher to meet the outage")
        assert sleeping(seconds)  # the host's process runs on...
        during = _call(client, "process", {"action": "poll", "process_id": process_id})
        assert during["status"] == "running", during  # ...and sbx still says so
        receipts = sbx_home / "logs" / "process-results"
        assert not any(receipts.glob(f"{process_id}*")), "a receipt for a running process"
        # A kill that cannot reach the host says so and changes nothing.
        unreached = _call(client, "process", {"action": "kill", "process_id": process_id})
        assert unreached["status"] == "error", unreached
        assert "may still run" in unreached["error"], unreached
        assert sleeping(seconds)
        after = _call(client, "process", {"action": "poll", "process_id": process_id})
        assert after["status"] == "running", after

        # sshd comes back on the same port: the process is still sbx's to end.
        config = Path(own_sshd.directory) / "sshd_config"
        restarted = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(
            lambda: f"{process_id} answers again" in worker.log(), 60, "the host to answer again"
        )
        killed = _call(client, "process", {"action": "kill", "process_id": process_id})
        assert killed["status"] == "killed", killed
        wait_until(lambda: not sleeping(seconds), 60, "the sleep to end on the host")
        assert worker.log().count(f"cannot tell whether {process_id} still runs") == 1
    finally:
        client.close()
        if restarted is not None:
            restarted.kill()
            restarted.wait()
        end_sleeps(seconds)


def test_a_command_stranded_by_a_dropped_connection_is_ended_on_reconnect(
    own_sshd: SSHServer, sbx_home: Path, start_worker: Any
) -> None:
    start_worker(None, **_ssh_env(own_sshd))
    client = SandboxClient(
        session_id="ssh-strand", backend="ssh", settings=settings_for(sbx_home, None)
    )
    seconds = unique_sleep_seconds()
    try:
        assert _call(client, "terminal", {"command": "cd /tmp && export KEPT=1"})["exit_code"] == 0
        thread, outcome = call_in_background(client, f"sleep {seconds}", wait=120)
        wait_until(lambda: sleeping(seconds), 60, "the command to run on the host")
        # The connection drops (its sshd processes die); sshd itself and the host stay.
        drop_connections(own_sshd)
        thread.join(120)
        assert outcome and isinstance(outcome[0], str), outcome  # the call ended with it
        back = _call(client, "terminal", {"command": 'echo "back $KEPT"'})
        assert back["output"] == "back 1\n", back
        # The command the dropped shell was running does not run on, orphaned, forever.
        wait_until(lambda: not sleeping(seconds), 60, "the stranded command to be ended")
    finally:
        client.close()
        end_sleeps(seconds)


def test_a_restarted_worker_does_not_end_processes_of_an_unreachable_host(
    own_sshd: SSHServer, sbx_home: Path, start_worker: Any
) -> None:
    first: WorkerProcess = start_worker(None, **_ssh_env(own_sshd))
    client = SandboxClient(
        session_id="ssh-adopt", backend="ssh", settings=settings_for(sbx_home, None)
    )
    seconds = unique_sleep_seconds()
    try:
        started = _call(client, "terminal", {"command": f"sleep {seconds}", "background": True})
        wait_until(lambda: sleeping(seconds), 60, "the background sleep to run on the host")
        first.stop(signal.SIGKILL)  # its checkpoint stays for the next worker to adopt
        _kill_sshd(own_sshd)
        second: WorkerProcess = start_worker(None, **_ssh_env(own_sshd))
        wait_until(lambda: "adoption:" in second.log(), 60, "the new worker's adoption")
        assert "0 finalized, 1 skipped" in second.log(), second.log()
        assert sleeping(seconds)
        receipts = sbx_home / "logs" / "process-results"
        assert not any(receipts.glob(f"{started['process_id']}*"))
    finally:
        client.close()
        end_sleeps(seconds)
