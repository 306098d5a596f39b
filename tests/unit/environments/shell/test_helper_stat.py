"""Whether a sandboxed process runs, asked through the in-sandbox helper scripts.

The helper runs here for real (``sh -c`` on this machine); only the transport can lose
an answer, as a docker exec under load did: its output came back empty."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from environments.base import SpawnedProcess
from environments.errors import SandboxError
from environments.procinfo import process_start_time
from environments.shell.helper import HelperOps


class LocalHelper(HelperOps):
    """Runs the helper scripts on this machine; loses the first ``lose`` answers."""

    where = "this machine"

    def __init__(self, lose: int = 0) -> None:
        self.lose = lose
        self.asked = 0

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        self.asked += 1
        done = subprocess.run(
            ["sh", "-c", script, "sbx", *args], input=stdin, capture_output=True, check=False
        )
        if self.lose > 0:
            self.lose -= 1
            return -1, b""
        return done.returncode, done.stdout


@pytest.fixture
def running() -> Iterator[SpawnedProcess]:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield SpawnedProcess(
            pid=proc.pid, pgid=os.getpgid(proc.pid), start_time=process_start_time(proc.pid),
            output_path="/nonexistent/out", status_path="/nonexistent/status",
        )  # fmt: skip
    finally:
        proc.kill()
        proc.wait()


def test_a_lost_answer_is_asked_again_not_taken_for_an_end(running: SpawnedProcess) -> None:
    helper = LocalHelper(lose=2)
    assert helper.is_running(running) is True
    assert helper.asked == 3


def test_a_process_that_never_answers_raises_instead_of_ending(running: SpawnedProcess) -> None:
    helper = LocalHelper(lose=10)
    with pytest.raises(SandboxError, match=f"no answer about pid {running.pid}"):
        helper.is_running(running)


def test_the_helpers_own_word_ends_a_process_at_once(running: SpawnedProcess) -> None:
    gone = running.model_copy(update={"pid": 2**22 + 1})  # above any pid_max here
    helper = LocalHelper()
    assert helper.is_running(gone) is False
    assert helper.asked == 1
    reused = running.model_copy(update={"start_time": (running.start_time or 0) + 1})
    assert LocalHelper().is_running(reused) is False
