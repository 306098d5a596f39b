"""A timed-out command of the local backend ends alone, in every shell, jailed or not.

``sh`` (dash) has no job control without a tty, so a command's subshell does not lead
a process group of its own there: signalling "its group" reached nothing, the call
waited out the shell's patience and the session shell was replaced, ending what the
session had left running in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from tests.fixtures_backends import require_jail


@pytest.fixture(params=[("bwrap", "sh"), ("bwrap", "bash"), ("none", "sh"), ("none", "bash")],
                ids=lambda p: "-".join(p))  # fmt: skip
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalEnvironment]:
    isolation, login = request.param
    if isolation == "bwrap":
        require_jail()
    config = LocalConfig(cwd=str(tmp_path), state_dir=str(tmp_path / "jails"),
                         isolation=isolation, shell=login, kill_grace=0.5)  # fmt: skip
    environment = LocalEnvironment(f"timeouts-{isolation}-{login}", config=config)
    try:
        yield environment
    finally:
        environment.close()


@pytest.mark.parametrize(
    "command",
    ["sleep 600; echo after", "while :; do :; done; echo after", "trap '' TERM; sleep 600"],
)
def test_a_timed_out_command_ends_alone(env: LocalEnvironment, command: str) -> None:
    started = env.exec("sleep 611 & echo $! > bg.pid; export KEPT=1", timeout=30)
    assert started.exit_code == 0, started
    result = env.exec(command, timeout=0.2)
    assert (result.exit_code, result.timed_out, result.shell_restarted) == (124, True, False)
    assert "after" not in result.output, result
    after = env.exec(
        'kill -0 "$(cat bg.pid)" && echo "alive $KEPT"; kill "$(cat bg.pid)"', timeout=30
    )
    assert (after.output, after.shell_restarted) == ("alive 1\n", False), after
