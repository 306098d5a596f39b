"""A serving session shell whose input is a terminal (a remote PTY: Daytona's, say).

A terminal in raw mode may hand one ``read`` more than one line, and bash's ``read``
builtin then loses what follows its line; bash with job control, leading a session,
takes its input's terminal as its controlling one, and its commands' subshells (other
process groups) are stopped when they read from it. These run the real bash on a real
pseudo-terminal set up as the remote backends set theirs up.
"""

from __future__ import annotations

import os
import subprocess
import time
import tty
from collections.abc import Iterator

import pytest

from environments.backends.local.channel import PipeChannel
from environments.shell.driver import SessionShell
from environments.shell.framing import shell_quote
from environments.shell.script import REBASE_BYTES, start_script


@pytest.fixture
def shell(tmp_path: os.PathLike[str]) -> Iterator[SessionShell]:
    def open_channel() -> PipeChannel:
        master, slave = os.openpty()
        tty.setraw(slave)  # as `stty raw -echo` does on the remote terminal
        leader = f"sh -c {shell_quote(start_script('bash'))}; exit"
        proc = subprocess.Popen(
            ["sh", "-c", leader],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={"PATH": os.environ["PATH"]},
            cwd=str(tmp_path),
            start_new_session=True,
        )
        os.close(slave)
        assert proc.stdout is not None
        channel = PipeChannel.over(proc, master, os.dup(proc.stdout.fileno()))
        proc.stdout.close()
        first = channel.read(30)
        assert first is not None and first.startswith(b"sbx-shell-pid "), first
        return channel

    session = SessionShell(open_channel, os.killpg, kill_grace=0.5)
    try:
        yield session
    finally:
        session.close()


def test_a_large_state_moves_into_the_parent_over_a_terminal(shell: SessionShell) -> None:
    fill = "f" * (REBASE_BYTES + 100)
    first = shell.run(f"export FILL={fill} MARK=one", timeout=30, output_limit=1 << 16)
    assert first.exit_code == 0
    pid = shell.shell_pid
    for mark in ("two", "three"):
        result = shell.run(f'echo "${{#FILL}} $MARK"; export MARK={mark}', timeout=30,
                           output_limit=1 << 16)  # fmt: skip
        assert (result.exit_code, result.timed_out) == (0, False), result
    last = shell.run('echo "$MARK"', timeout=30, output_limit=1 << 16)
    assert last.output.text() == "three\n"
    assert (shell.shell_pid, shell.restarts) == (pid, 0)


def test_tmout_in_a_large_state_does_not_end_an_idle_shell(shell: SessionShell) -> None:
    fill = "f" * (REBASE_BYTES + 100)
    assert shell.run(f"export TMOUT=1 IFS=/ FILL={fill}", timeout=30,
                     output_limit=1 << 16).exit_code == 0  # fmt: skip
    assert shell.run("echo moved", timeout=30, output_limit=1 << 16).exit_code == 0
    pid = shell.shell_pid
    # The subject is idleness longer than TMOUT: a shell whose reads took it would be gone.
    time.sleep(2.5)
    after = shell.run('echo "$TMOUT ${#FILL}"', timeout=30, output_limit=1 << 16)
    assert after.output.text() == f"1 {len(fill)}\n"
    assert (shell.shell_pid, shell.restarts) == (pid, 0)
