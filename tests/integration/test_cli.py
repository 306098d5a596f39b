"""The ``sbx`` CLI against a real worker: output, exit codes, JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import worker_env
from tests.helpers import REPO


def sbx(
    home: Path, broker_url: str | None, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args],
        env=worker_env(home, broker_url, **env), cwd=str(REPO),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def worker(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)


def test_exec_prints_output_and_exits_with_status(sbx_home: Path, worker: None) -> None:
    p = sbx(sbx_home, None, "exec", "--", "echo hello; exit 7")
    assert (p.stdout, p.returncode) == ("hello\n", 7)


def test_exec_keeps_cli_session_state(sbx_home: Path, worker: None) -> None:
    assert sbx(sbx_home, None, "exec", "--", "cd / && export CLI_VAR=1").returncode == 0
    p = sbx(sbx_home, None, "exec", "--", 'pwd; echo "$CLI_VAR"')
    assert p.stdout == "/\n1\n"


def test_exec_json(sbx_home: Path, worker: None) -> None:
    p = sbx(sbx_home, None, "exec", "--json", "--", "printf x")
    assert p.returncode == 0
    assert json.loads(p.stdout)["output"] == "x"


def test_exec_timeout_is_124(sbx_home: Path, worker: None) -> None:
    p = sbx(sbx_home, None, "exec", "--timeout", "1", "--", "sleep 30")
    assert p.returncode == 124
    assert "timed out" in p.stderr


def test_call_prints_raw_result_even_for_errors(sbx_home: Path, worker: None) -> None:
    p = sbx(sbx_home, None, "call", "terminal", "{not json")
    assert p.returncode == 0
    assert "not valid JSON" in json.loads(p.stdout)["error"]


def test_wrong_token_is_exit_3(sbx_home: Path, worker: None) -> None:
    p = sbx(sbx_home, None, "exec", "--", "echo secret-output",
            SBX_SESSION_ID="someone", SBX_SESSION_TOKEN="sbx1.wrong")  # fmt: skip
    assert p.returncode == 3
    assert "secret-output" not in p.stdout
    assert p.stderr.count("\n") == 1


def test_usage_error_is_exit_2(sbx_home: Path) -> None:
    p = sbx(sbx_home, None, "exec")
    assert p.returncode == 2
    p = sbx(sbx_home, None, "no-such-command")
    assert p.returncode == 2


def test_tools_lists_terminal(sbx_home: Path) -> None:
    p = sbx(sbx_home, None, "tools", "--json")
    names = [d["function"]["name"] for d in json.loads(p.stdout)]
    assert "terminal" in names


def test_doctor_reports_every_backend(sbx_home: Path) -> None:
    p = sbx(sbx_home, None, "doctor", "--json")
    report = json.loads(p.stdout)
    assert report["backends"]["local"] == {"available": True, "reason": "ok"}
    for name in ("docker", "ssh", "singularity", "modal", "daytona", "vercel_sandbox"):
        assert set(report["backends"][name]) == {"available", "reason"}


def test_demo_runs_the_main_job(sbx_home: Path) -> None:
    p = sbx(sbx_home, None, "demo")
    assert p.returncode == 0, p.stderr
    assert '"output": "hi from /tmp/sbx-demo\\n"' in p.stdout
    assert '"exit_code": 124' in p.stdout
    assert "Unknown tool" in p.stdout


def test_tools_by_toolset_and_unknown_toolset(sbx_home: Path) -> None:
    p = sbx(sbx_home, None, "tools", "--json", "--toolsets", "terminal")
    assert [d["function"]["name"] for d in json.loads(p.stdout)] == ["terminal"]
    p = sbx(sbx_home, None, "tools", "--toolsets", "no-such-toolset")
    assert p.returncode == 2
    assert "no-such-toolset" in p.stderr


def test_readme_main_job_command(sbx_home: Path) -> None:
    """The README's first command, exactly as a user runs it (needs the repo's .venv)."""
    from tests.helpers import require

    require((REPO / ".venv" / "bin" / "sbx").exists(), "no .venv: run `bash tests/run` first")
    p = subprocess.run(
        ["bash", "deploy/quickstart.sh"],
        env=worker_env(sbx_home, None), cwd=str(REPO),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "hi from /tmp/sbx-demo" in p.stdout
