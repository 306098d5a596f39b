"""``sbx exec`` and ``sbx call`` while no worker runs: a word on stderr, and the call
still runs once a worker comes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from process_registry.sessions import load_or_create_secret
from tests.fixtures_workers import worker_env
from tests.helpers import REPO


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (["exec", "--", "echo ran-$((1+1))"], "ran-2\n"),
        (["call", "terminal", '{"command": "echo ran-$((2+1))"}'], '"output": "ran-3\\n"'),
    ],
)
def test_a_call_no_worker_takes_is_announced_and_runs_when_one_comes(
    broker_url: str | None, sbx_home: Path, start_worker: Any, args: list[str], answer: str
) -> None:
    load_or_create_secret(sbx_home / "secret.key")  # the deployment's, as its workers will use
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.cli.main", *args],
        env=worker_env(sbx_home, broker_url, SBX_SESSION_ID="waiting"),
        cwd=str(REPO),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        notice = proc.stderr.readline()  # the CLI's first word: nothing else comes first
        assert notice.startswith("sbx: no worker has taken the call after 5s"), notice
        assert "is an `sbx worker` running" in notice
        start_worker(broker_url)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (out, err)
    assert answer in out
    assert "no worker has taken" not in err  # said once


def test_no_notice_when_a_worker_takes_the_call(
    broker_url: str | None, sbx_home: Path, start_worker: Any
) -> None:
    start_worker(broker_url)
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli.main", "exec", "--", "sleep 6; echo slept"],
        env=worker_env(sbx_home, broker_url, SBX_SESSION_ID="taken"),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "slept\n", "")
