"""Commands of the local backend start with every signal at its default disposition.

The jail's init and the pty relay are Python programs that exec the user's command,
and Python ignores SIGPIPE and SIGXFSZ; an ignored signal survives ``exec``. With
them ignored, ``yes | head -n1`` ends with "Broken pipe" and a shell loop writing
into a closed pipe never ends (it spins, keeping its jail alive). Each attack runs
inside a real sandboxed call -- the session shell, a background process, a
background process on a pty -- and must end as it does on a plain host.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.base import SpawnedProcess
from tests.fixtures_backends import require_jail
from tests.helpers import wait_until

SIGPIPE_KILLED = 128 + signal.SIGPIPE

REPORT = "grep -E '^Sig(Ign|Blk):' /proc/self/status"
"""What a command of the sandbox reports of its own signal dispositions."""

YES_HEAD = '{ yes; echo "yes ended $?" >&2; } | head -n1'
"""Ends with ``yes`` killed by SIGPIPE (141) -- or, with SIGPIPE ignored, exit status 1
and "Broken pipe". Plain ``sh`` (dash) has no PIPESTATUS."""


def _masks(output: str) -> dict[str, int]:
    """``{"SigIgn": mask, "SigBlk": mask}`` from :data:`REPORT`'s output."""
    fields = [line.split(":") for line in output.splitlines() if line.startswith("Sig")]
    return {name: int(value.strip(), 16) for name, value in fields}


def _named(mask: int) -> list[str]:
    return [signal.Signals(n).name for n in range(1, 65) if mask >> (n - 1) & 1 and
            n in signal.valid_signals()]  # fmt: skip


def assert_default_dispositions(output: str) -> None:
    masks = _masks(output)
    assert set(masks) == {"SigIgn", "SigBlk"}, output
    assert _named(masks["SigIgn"]) == [], f"ignored in the sandbox: {output}"
    assert _named(masks["SigBlk"]) == [], f"blocked in the sandbox: {output}"


@pytest.fixture(params=["bwrap", "none"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalEnvironment]:
    """A local session, jailed (the case that broke) and, for comparison, not."""
    if request.param == "bwrap":
        require_jail()
    workspace = tmp_path / "work"
    workspace.mkdir()
    config = LocalConfig(cwd=str(workspace), state_dir=str(tmp_path / "jails"),
                         isolation=request.param, kill_grace=0.5)  # fmt: skip
    e = LocalEnvironment("signals", config)
    yield e
    e.close()


@pytest.fixture
def spool(tmp_path: Path) -> str:
    """The worker's spool (where processes of an unjailed session write)."""
    (tmp_path / "spool").mkdir()
    return str(tmp_path / "spool")


def _status(env: LocalEnvironment, status_path: str) -> bytes:
    try:
        return env.read_file(status_path)
    except FileNotFoundError:
        return b""


def _finish(env: LocalEnvironment, spawned: SpawnedProcess, status_path: str) -> tuple[str, str]:
    """``(output, status)`` of a background process once it has ended."""
    wait_until(lambda: bool(_status(env, status_path)), 60, "the background process to end")
    return env.read_file(spawned.output_path).decode(), env.read_file(status_path).decode()


def test_the_session_shell_starts_commands_with_default_dispositions(
    env: LocalEnvironment,
) -> None:
    assert_default_dispositions(env.exec(REPORT, timeout=60).output)


def test_a_pipe_reader_that_quits_ends_the_writer_in_the_session_shell(
    env: LocalEnvironment,
) -> None:
    r = env.exec("yes | head -n1; echo ${PIPESTATUS[@]}", timeout=60)
    assert r.output == f"y\n{SIGPIPE_KILLED} 0\n"
    # A shell loop writing into a closed pipe ends too (it used to spin until the timeout).
    r = env.exec("while :; do echo x; done | head -n1; echo ${PIPESTATUS[@]}", timeout=60)
    assert (r.output, r.timed_out) == (f"x\n{SIGPIPE_KILLED} 0\n", False)


def test_a_background_process_starts_with_default_dispositions(
    env: LocalEnvironment, spool: str
) -> None:
    out_path, status_path = env.process_paths("psig", spool)
    spawned = env.spawn(f"{REPORT}; {YES_HEAD}", output_path=out_path, status_path=status_path)
    output, status = _finish(env, spawned, status_path)
    assert_default_dispositions(output)
    assert f"yes ended {SIGPIPE_KILLED}" in output and "Broken pipe" not in output
    assert status == "0"


def test_a_pty_process_starts_with_default_dispositions(env: LocalEnvironment, spool: str) -> None:
    out_path, status_path = env.process_paths("ptysig", spool)
    spawned = env.spawn_on_pty(f"{REPORT}; {YES_HEAD}; while :; do echo x; done | head -n1",
                               output_path=out_path, status_path=status_path)  # fmt: skip
    output, status = _finish(env, spawned, status_path)
    assert_default_dispositions(output)
    assert f"yes ended {SIGPIPE_KILLED}" in output and "Broken pipe" not in output
    assert status == "0"
