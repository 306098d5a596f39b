"""A foreground command on a pseudo-terminal over a real local sandbox: exit status,
output bounds, cancellation, a missing workdir, and no files left behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from environments.errors import Unsupported, WorkdirNotFound
from environments.pty_exec import _host_spool, run_on_pty
from tests.fixtures_backends import Factory
from tests.helpers import wait_until


def test_status_output_and_no_files_left(local_factory: Factory) -> None:
    env = local_factory("pty-exec-1")
    r = run_on_pty(env, "stty size >/dev/null && echo ok; exit 3", timeout=60)
    assert (r.output, r.exit_code, r.timed_out, r.cancelled) == ("ok\r\n", 3, False, False)
    assert list(Path(_host_spool()).iterdir()) == []


def test_output_is_bounded_head_and_tail(local_factory: Factory) -> None:
    env = local_factory("pty-exec-2")
    r = run_on_pty(env, "echo first; seq 1 200000; echo last", timeout=120, output_limit=4096)
    assert r.truncated and r.output_bytes > 4096
    assert r.output.startswith("first\r\n") and r.output.endswith("last\r\n")
    assert "bytes of output omitted" in r.output


def test_cancel_kills_it_with_130(local_factory: Factory, tmp_path: Path) -> None:
    env = local_factory("pty-exec-3")
    cancel = threading.Event()
    marker = tmp_path / "started"

    def cancel_once_started() -> None:
        wait_until(marker.exists, 60, "the command to start")
        cancel.set()

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    r = run_on_pty(env, f"echo started; touch {marker}; sleep 600", timeout=600, cancel=cancel)
    canceller.join()
    assert (r.exit_code, r.cancelled, r.timed_out) == (130, True, False)
    assert r.output == "started\r\n"


def test_missing_workdir_runs_nothing(local_factory: Factory, tmp_path: Path) -> None:
    env = local_factory("pty-exec-4")
    with pytest.raises(WorkdirNotFound):
        run_on_pty(env, f"touch {tmp_path}/ran", workdir=str(tmp_path / "missing"), timeout=60)
    assert not (tmp_path / "ran").exists()


def test_a_backend_without_a_pty_raises_unsupported(apptainer_factory: Factory) -> None:
    env = apptainer_factory("pty-exec-5")
    with pytest.raises(Unsupported):
        run_on_pty(env, "echo hi", timeout=60)
