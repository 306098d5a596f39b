"""The exit code a killed background process reports is what its command made of the kill,
jailed or not: 143 when the TERM ended it, 137 when it needed the KILL, its own code when
a trap of its own ended it.

Unjailed, the wrapper that records the code leads the process's group and got the TERM
too: it ended on it and the receipt said 143 whatever the command did.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from process_registry.table import ProcessTable
from tests.fixtures_backends import require_jail
from tests.helpers import wait_until

OWNER = "s-owner"


@pytest.fixture(params=["bwrap", "none"])
def local(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalEnvironment]:
    if request.param == "bwrap":
        require_jail()
    env = LocalEnvironment(
        OWNER, LocalConfig(cwd=str(tmp_path), kill_grace=0.5, isolation=request.param)
    )
    yield env
    env.close()


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("echo ready; exec sleep 600", 143),
        ("trap '' TERM; echo ready; while :; do sleep 1; done", 137),
        ("trap 'exit 5' TERM; echo ready; while :; do sleep 1; done", 5),
    ],
    ids=["term", "ignores-term", "own-trap"],
)
def test_a_killed_process_reports_what_ended_it(
    local: LocalEnvironment, tmp_path: Path, command: str, code: int
) -> None:
    home = tmp_path / "home"
    table = ProcessTable(home, lambda rec: local, spool_dir=tmp_path / "spool", kill_grace=1.0)
    try:
        rec = table.start(local, command, owner_session_id=OWNER)
        wait_until(lambda: "ready" in table.log(rec.process_id, OWNER).text, 60, "started")
        info = table.kill(rec.process_id, OWNER)
        assert (info.status, info.exit_code) == ("killed", code), info
    finally:
        table.close()
    receipt = json.loads((home / "logs" / "process-results" / f"{rec.process_id}.json").read_text())
    assert (receipt["status"], receipt["exit_code"]) == ("killed", code), receipt
