"""What an operator decides about sandboxes, through real workers: the environment that
reaches them, the backends served, isolation ``none`` said out loud, no sandbox where no
jail can be made, and an aborted worker's embedded broker."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fixtures_backends import require_jail
from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, call, short_tmpdir, wait_until
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient

WORKER_SECRETS = {
    "DATABASE_URL": "postgres://app:db-url-secret@db.internal/app",
    "DB_PASS": "db-pass-secret",
    "MASTER_KEY": "master-key-secret",
    "RABBITMQ_URL": "amqp://u:rabbit-secret@mq.internal//",
    "HARMLESS_LOOKING": "not-forwarded-value",
}


def test_worker_variables_reach_no_sandbox_unless_forwarded(
    sbx_home: Path, start_worker: Any
) -> None:
    require_jail()
    start_worker(None, SBX_FORWARD_ENV="FORWARDED_ONE", FORWARDED_ONE="forwarded-value",
                 **WORKER_SECRETS)  # fmt: skip
    with SandboxClient(session_id="env", settings=settings_for(sbx_home, None)) as c:
        out = call(c, "terminal", {"command": "env; cat /proc/1/environ"})["output"]
        bg = c.start("env")
        c.wait(bg.process_id, timeout=60)
        out += c.logs(bg.process_id).text
    for value in WORKER_SECRETS.values():
        assert value not in out
    assert "FORWARDED_ONE=forwarded-value" in out and "PATH=" in out


def test_a_backend_not_allowed_is_denied_before_anything_runs(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    require_jail()
    start_worker(None)
    marker = tmp_path / "ran"
    settings = settings_for(sbx_home, None)
    for backend in ("docker", "ssh", "singularity"):
        with SandboxClient(session_id="be", settings=settings, backend=backend) as c:
            r = call(c, "terminal", {"command": f"touch {marker}"})
        assert r["status"] == "denied" and "SBX_ALLOWED_BACKENDS" in r["error"], r
    assert not marker.exists()
    with SandboxClient(session_id="be", settings=settings, backend="local") as c:
        ok = call(c, "terminal", {"command": f"touch {marker} && echo ran"})
    assert ok["output"] == "ran\n" and marker.exists()


def test_isolation_none_is_said_plainly(sbx_home: Path, start_worker: Any) -> None:
    doctor = subprocess.run(
        [sys.executable, "-m", "worker.cli.main", "doctor"],
        env=worker_env(sbx_home, None, SBX_LOCAL_ISOLATION="none"), cwd=str(REPO),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr
    assert "no isolation, trusted code only" in doctor.stdout
    worker = start_worker(None, SBX_LOCAL_ISOLATION="none")
    wait_until(lambda: "no isolation, trusted code only" in worker.log(), 30, "the start log")
    with SandboxClient(session_id="trusted", settings=settings_for(sbx_home, None)) as c:
        assert call(c, "terminal", {"command": "echo runs"})["output"] == "runs\n"


def test_no_jail_means_no_local_session(sbx_home: Path, start_worker: Any, tmp_path: Path) -> None:
    worker = start_worker(None, SBX_LOCAL_BWRAP=str(tmp_path / "no-bwrap-here"))
    wait_until(lambda: "local sessions are refused" in worker.log(), 30, "the start log")
    marker = tmp_path / "ran"
    with SandboxClient(session_id="nojail", settings=settings_for(sbx_home, None)) as c:
        r = call(c, "terminal", {"command": f"touch {marker}"})
    assert "SBX_LOCAL_ISOLATION=none" in r["error"] and "bubblewrap" in r["error"]
    assert not marker.exists()


def test_an_aborted_worker_leaves_no_embedded_broker() -> None:
    home = short_tmpdir("sbx-abort-")
    broker = EmbeddedBroker(home)
    try:
        # The embedded broker starts first; Celery then refuses the log level.
        aborted = subprocess.run(
            [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "NO-SUCH-LEVEL"],
            env=worker_env(home, None), cwd=str(REPO), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert aborted.returncode != 0
        assert (broker.dir / "redis.conf").exists(), "the broker was never started"
        assert not broker.ping() and broker.status()["pid"] is None
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)


def test_the_worker_environment_reaches_no_apptainer_sandbox(
    sbx_home: Path, start_worker: Any, fake_apptainer: Path, apptainer_rootfs: Path
) -> None:
    """``apptainer exec`` into an instance passes its caller's environment in unless that
    exec says ``--cleanenv`` (the instance's ``--containall`` does not carry over): the
    shell, its helpers and background processes must not see the worker's variables."""
    start_worker(None, SBX_BACKEND="apptainer", SBX_APPTAINER_IMAGE=str(apptainer_rootfs),
                 HTTPS_PROXY="http://proxy-user:proxy-secret@proxy.internal:3128",
                 KUBECONFIG="/srv/worker/kubeconfig-secret")  # fmt: skip
    with SandboxClient(session_id="app-env", settings=settings_for(sbx_home, None)) as c:
        out = call(c, "terminal", {"command": "env"})["output"]
        assert "APPTAINER_NAME=" in out  # the command ran in the instance
        bg = c.start("env")
        c.wait(bg.process_id, timeout=60)
        out += c.logs(bg.process_id).text
    assert "proxy-secret" not in out and "kubeconfig-secret" not in out, out
