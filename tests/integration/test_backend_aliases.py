"""``singularity`` and ``apptainer`` are one backend: a real worker serves a session opened
under either name in one sandbox, and its idle reaper never stops a sandbox that still runs
a background process of the session, whichever name the session used.

The worker runs the apptainer backend through the stand-in ``apptainer`` executable
(instances under bubblewrap); every invocation is logged, which is how the test sees
which instances were stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from environments.backends.apptainer import instance_name
from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient

WAIT = 120.0  # an upper bound for a condition, not a timing assertion


def _stopped(log: Path) -> set[str]:
    calls = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {c[2] for c in calls if c[:2] == ["instance", "stop"] and len(c) > 2}


def test_a_session_under_either_name_keeps_its_sandbox_while_a_process_runs(
    sbx_home: Path, start_worker: Any, fake_apptainer: Path, apptainer_rootfs: Path
) -> None:
    start_worker(
        None,
        SBX_APPTAINER_IMAGE=str(apptainer_rootfs),
        SBX_ALLOWED_BACKENDS="local,apptainer",
        SBX_SANDBOX_IDLE_TTL="0.5",  # every sandbox here is idle long before the end
        SBX_HEARTBEAT_INTERVAL="0.2",
        SBX_LOST_AFTER="2",  # the reaper's pass interval
    )
    settings = settings_for(sbx_home, None)
    processes: dict[str, str] = {}
    for name in ("singularity", "apptainer"):
        with SandboxClient(session_id=f"alias-{name}", backend=name, settings=settings) as c:
            # A file only this instance holds (its /tmp is a private tmpfs).
            assert c.exec("echo kept > /tmp/marker").exit_code == 0
            processes[name] = c.start("sleep 600").process_id
            assert c.poll(processes[name]).status == "running"
    # A session without processes, used last: once the reaper closed it, it had
    # passed over the two sessions above, idle for longer.
    with SandboxClient(session_id="alias-idle", backend="singularity", settings=settings) as c:
        assert c.exec("true").exit_code == 0
    wait_until(lambda: instance_name("alias-idle") in _stopped(fake_apptainer), WAIT,
               "the idle reaper to stop the sandbox of the session without processes")  # fmt: skip

    stopped = _stopped(fake_apptainer)
    for name in ("singularity", "apptainer"):
        assert instance_name(f"alias-{name}") not in stopped
        with SandboxClient(session_id=f"alias-{name}", backend=name, settings=settings) as c:
            assert c.poll(processes[name]).status == "running"
            # The same instance serves the session: its private /tmp still holds the file.
            assert c.exec("cat /tmp/marker").output == "kept\n"
            # The other name reaches the same session sandbox and the same process.
            other = "apptainer" if name == "singularity" else "singularity"
        with SandboxClient(session_id=f"alias-{name}", backend=other, settings=settings) as c:
            assert c.exec("cat /tmp/marker").output == "kept\n"
            assert c.kill(processes[name]).status in ("killed", "exited")
