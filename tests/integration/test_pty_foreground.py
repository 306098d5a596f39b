"""``pty: true`` in the foreground, through a real worker: run on a pseudo-terminal on the
local backend, refused with a clear error (naming the backends that can) elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, sleeping, unique_sleep_seconds, wait_until
from tests.integration.test_cli import sbx
from worker.client import SandboxClient


def call(client: SandboxClient, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call("terminal", args))
    return result


def test_exec_pty_runs_on_a_terminal(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    command = "test -t 0 && test -t 1 && test -t 2 && echo tty; printf 'a\\nb\\n'; exit 5"
    p = subprocess.run(  # bytes: text mode would turn the terminal's \r\n into \n
        [sys.executable, "-m", "worker.cli.main", "exec", "--pty", "--", command],
        env=worker_env(sbx_home, None), cwd=str(REPO), capture_output=True, timeout=120,
    )  # fmt: skip
    assert (p.stdout, p.returncode) == (b"tty\r\na\r\nb\r\n", 5), p.stderr
    plain = sbx(sbx_home, None, "exec", "--", "test -t 1 || echo no-tty")
    assert (plain.stdout, plain.returncode) == ("no-tty\n", 0)


def test_pty_call_keeps_session_cwd_and_kills_its_tree_on_timeout(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    start_worker(None)
    settings = settings_for(sbx_home, None)
    with SandboxClient(session_id="pty-fg", settings=settings) as c:
        assert call(c, {"command": f"cd {tmp_path} && export PTY_VAR=1"})["exit_code"] == 0
        r = call(c, {"command": 'pwd; echo "$PTY_VAR"; cd /', "pty": True})
        assert (r["output"], r["exit_code"], r["error"]) == (f"{tmp_path}\r\n1\r\n", 0, None)
        assert r["cwd"] == str(tmp_path)
        # A pty command is not the session shell: its cd is not kept.
        assert call(c, {"command": "pwd"})["output"] == f"{tmp_path}\n"

        # Nothing is typed into the terminal: a read waits until the timeout kills it.
        seconds = unique_sleep_seconds()
        started = tmp_path / "started"
        r = call(c, {"command": f"sh -c 'touch {started}; exec sleep {seconds}' & read line",
                     "pty": True, "timeout": 2})  # fmt: skip
        assert (r["exit_code"], r.get("status")) == (124, None)
        assert "timed out" in r["error"]
        assert started.exists()
        wait_until(lambda: not sleeping(seconds), 60,
                   "the pty command's background child to be killed")  # fmt: skip
        # The session goes on.
        assert call(c, {"command": "echo after"})["output"] == "after\n"


def test_pty_on_a_backend_without_one_is_refused_and_nothing_runs(
    sbx_home: Path, start_worker: Any, fake_apptainer: Path, apptainer_rootfs: Path
) -> None:
    start_worker(
        None, SBX_APPTAINER_IMAGE=str(apptainer_rootfs), SBX_ALLOWED_BACKENDS="local,apptainer"
    )
    p = sbx(sbx_home, None, "exec", "--backend", "singularity", "--pty", "--", "echo ran")
    assert p.returncode == 2
    assert p.stdout == ""
    assert "pseudo-terminal" in p.stderr and "'apptainer' backend has none" in p.stderr
    able = p.stderr.split("backends with one: ", 1)[1].split(")", 1)[0].split(", ")
    assert "local" in able and "apptainer" not in able
    assert p.stderr.count("\n") == 1
    p = sbx(sbx_home, None, "call", "--backend", "apptainer", "terminal",
            '{"command": "echo ran", "pty": true}')  # fmt: skip
    assert p.returncode == 0
    assert json.loads(p.stdout)["status"] == "unsupported"
    # No apptainer command ran: the sandbox was not even started.
    assert not fake_apptainer.exists() or fake_apptainer.read_text() == ""
