"""A background process on an ssh host outlives an outage of the host's sshd: a real
worker, a real sshd that is killed (its connections too) and started again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from tests.sshd import SSHServer, drop_connections, wait_listening, worker_ssh_env
from worker.client import SandboxClient


def test_a_running_process_is_not_lost_when_sshd_goes_away_for_a_while(
    own_sshd: SSHServer, sbx_home: Path, start_worker: Any
) -> None:
    server = own_sshd
    start_worker(None, **worker_ssh_env(server))
    gate = Path(server.scratch) / "gate"  # where the session's account can see it
    restarted: subprocess.Popen[bytes] | None = None
    with SandboxClient(session_id="blip", settings=settings_for(sbx_home, None)) as c:
        started = c.start(f"while [ ! -e {gate} ]; do sleep 0.05; done; echo fine; exit 5")
        try:
            assert c.poll(started.process_id).status == "running"
            drop_connections(server, listener_too=True)
            # While sshd is away the process is asked after and cannot be reached: it
            # still runs, as far as anyone can tell, and is never taken for ended.
            answer = json.loads(
                c.tool_call("process", {"action": "poll", "process_id": started.process_id})
            )
            assert answer["status"] == "running", answer
            restarted = subprocess.Popen(
                ["/usr/sbin/sshd", "-D", "-e", "-f", f"{server.directory}/sshd_config"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            wait_until(lambda: wait_listening(server.port, restarted), 60, "sshd again")
            gate.touch()
            final = c.wait(started.process_id, timeout=90)
            assert (final.status, final.exit_code) == ("exited", 5), final
            receipt = c.receipt(started.process_id)
            assert (receipt.status, receipt.exit_code, receipt.output) == ("exited", 5, "fine\n")
        finally:
            gate.touch()  # a test failing half-way leaves no process waiting behind it
            if restarted is not None:
                restarted.kill()
                restarted.wait()
