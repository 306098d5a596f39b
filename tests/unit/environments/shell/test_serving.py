"""A serving session shell (``/proc`` present) forks each command's subshell ahead.

Real shells on this machine (bash, dash, busybox ash) behind pipes: what the
controller writes is recorded, so the tests see what each command costs on the wire.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from environments.backends.local.channel import PipeChannel
from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.backends.local.tree import kill_tree
from environments.shell.driver import SessionShell
from environments.shell.result import stray_note
from environments.shell.script import REBASE_BYTES, REBASE_REQUEST, REBASE_STATUS

SHELLS = {
    "bash": ["bash", "--noprofile", "--norc", "-s"],
    "dash": ["dash", "-s"],
    "busybox": ["busybox", "sh", "-s"],
}


class RecordingChannel(PipeChannel):
    """A local shell's pipes, keeping every write."""

    writes: list[bytes]

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        super().write(data)


@pytest.fixture(params=sorted(SHELLS))
def shell(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Iterator[SessionShell]:
    argv = SHELLS[request.param]
    if shutil.which(argv[0]) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{argv[0]} is missing")
        pytest.skip(f"{argv[0]} is not installed")
    channels: list[RecordingChannel] = []

    def open_channel() -> RecordingChannel:
        channel = RecordingChannel(argv, {"PATH": os.environ["PATH"]}, str(tmp_path))
        channel.writes = []
        channels.append(channel)
        return channel

    killed: dict[int, set[int]] = {}
    # As the local backend signals (dash and busybox have no job control here).
    session = SessionShell(
        open_channel, lambda pgid, signum: kill_tree(pgid, signum, killed), kill_grace=0.5
    )
    session.channels = channels  # type: ignore[attr-defined]
    try:
        yield session
    finally:
        session.close()


def run(shell: SessionShell, command: str) -> str:
    result = shell.run(command, timeout=30, output_limit=1 << 20)
    assert result.exit_code == 0, (command, result)
    return result.output.text()


def writes(shell: SessionShell) -> list[bytes]:
    channels: list[RecordingChannel] = shell.channels  # type: ignore[attr-defined]
    assert len(channels) == 1, "the shell was replaced"
    return channels[0].writes


def waiting_subshell(shell: SessionShell, last: int) -> psutil.Process:
    """The subshell the shell forked for its next command, after the one (pid ``last``)
    that ran the last command (it forks when that one ended: it may take a moment)."""
    assert shell.shell_pid is not None
    parent = psutil.Process(shell.shell_pid)
    deadline = time.monotonic() + 30
    while True:
        waiting = [p for p in parent.children() if p.pid != last and _copy_of(p, parent)]
        if waiting:
            return waiting[0]
        assert time.monotonic() < deadline, "no subshell waits for the next command"
        time.sleep(0.01)  # polling for a fork, which nothing announces


def _copy_of(p: psutil.Process, parent: psutil.Process) -> bool:
    """Whether ``p`` runs as a copy of ``parent`` (the subshell that ran the last command
    may linger a moment as a zombie)."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE and p.cmdline() == parent.cmdline()
    except psutil.Error:
        return False


def test_state_persists_and_each_line_carries_only_its_command(shell: SessionShell) -> None:
    run(shell, "cd /tmp && export MODE='two words' LINES2='a\nb'")
    sent = len(writes(shell))
    assert run(shell, 'printf "%s|%s|" "$MODE" "$LINES2"; pwd') == "two words|a\nb|/tmp\n"
    assert run(shell, "echo $((6 * 7))") == "42\n"
    line = writes(shell)[-1]
    assert len(writes(shell)) == sent + 2
    assert line.count(b"\n") == 1 and b"echo $((6 * 7))" in line


def test_exit_and_per_call_variables_stay_in_their_subshell(shell: SessionShell) -> None:
    result = shell.run("exit 3", timeout=30, output_limit=4096)
    assert result.exit_code == 3
    once = shell.run('echo "$ONCE"', env={"ONCE": "x"}, timeout=30, output_limit=4096)
    assert once.output.text() == "x\n"
    assert run(shell, 'echo "[$ONCE]"') == "[]\n"
    assert shell.restarts == 0


def test_a_large_state_moves_into_the_parent_once(shell: SessionShell) -> None:
    job = int(run(shell, "sleep 1000 & echo $!"))
    big = "x" * REBASE_BYTES + "\n'end' \\ $HOME"
    shell.restore({**shell.env, "BIG": big}, "/tmp")  # as a session continued elsewhere
    assert run(shell, 'printf %s "$BIG"; pwd') == big + "/tmp\n"
    for _ in range(3):
        assert run(shell, 'printf "%s\n" "${#BIG}"') == f"{len(big)}\n"
    # The parent took the state once; later lines no longer carry it.
    assert writes(shell).count(REBASE_REQUEST) == 1
    assert all(len(line) < 200 for line in writes(shell)[-3:])
    assert shell.restarts == 0
    assert psutil.Process(job).is_running()  # the shell was moved, not replaced
    os.kill(job, signal.SIGKILL)


def test_a_waiting_subshell_killed_from_outside_loses_no_command(
    shell: SessionShell, tmp_path: os.PathLike[str]
) -> None:
    last = int(run(shell, "read -r pid rest < /proc/self/stat; echo $pid"))
    waiting = waiting_subshell(shell, last)
    waiting.kill()
    waiting.wait(timeout=30)
    assert run(shell, "echo once >> ran.txt; echo done") == "done\n"
    assert run(shell, "cat ran.txt") == "once\n"
    assert shell.restarts == 0


def test_a_command_exiting_with_the_rebase_status_loses_nothing(shell: SessionShell) -> None:
    # The parent reads the next line itself then: a command line, which still runs once.
    command = f"export KEPT=1; mkdir d; cd d; exit {REBASE_STATUS}"
    assert shell.run(command, timeout=30, output_limit=4096).exit_code == REBASE_STATUS
    assert run(shell, "echo once >> ran.txt; echo ran") == "ran\n"
    assert run(shell, 'echo "$KEPT"; basename "$PWD"; cat ran.txt') == "1\nd\nonce\n"
    assert shell.restarts == 0


def test_a_command_signalling_its_shell_loses_no_state(shell: SessionShell) -> None:
    # Its parent ends (as with any kill of the shell); the next call runs in a new one.
    parent = "read -r p c s parent rest < /proc/self/stat; "
    assert run(shell, f'export KEPT=1; cd /tmp; {parent} kill -USR1 "$parent"; echo x') == "x\n"
    assert run(shell, 'echo "$KEPT"; pwd') == "1\n/tmp\n"
    assert shell.restarts == 1


def test_a_command_that_outlives_its_shell_keeps_its_state(shell: SessionShell) -> None:
    # The report goes where the command's output goes once the shell is gone (a shell that
    # has exited shows no descriptors): the command waits for exactly that.
    gone = 'while [ -e "/proc/$parent/fd/1" ]; do :; done; '
    parent = "read -r p c s parent rest < /proc/self/stat; "
    command = f'export KEPT=2; cd /; {parent} kill -USR1 "$parent"; {gone} echo y'
    assert run(shell, command) == "y\n"
    assert run(shell, 'echo "$KEPT"; pwd') == "2\n/\n"


@pytest.mark.parametrize("login", ["bash", "sh"])
def test_a_deadline_before_the_command_reports_its_group_ends_only_the_command(
    login: str, tmp_path: os.PathLike[str]
) -> None:
    # With no time left, the call still waits for the command's group to kill that group:
    # the session shell and what else runs in it live on.
    config = LocalConfig(cwd=str(tmp_path), isolation="none", shell=login, kill_grace=0.5)
    env = LocalEnvironment(f"deadline-{login}", config=config)
    try:
        assert env.exec("sleep 611 & echo $! > bg.pid", timeout=30).exit_code == 0
        result = env.exec("sleep 30", timeout=0)
        assert (result.exit_code, result.timed_out) == (124, True), result
        after = env.exec('kill -0 "$(cat bg.pid)" && echo alive; kill "$(cat bg.pid)"', timeout=30)
        assert (after.output, after.shell_restarted) == ("alive\n", False), after
    finally:
        env.close()


@pytest.mark.parametrize("escape", ["", "setsid "])
def test_output_written_between_calls_is_dropped_and_said(
    shell: SessionShell, tmp_path: os.PathLike[str], escape: str
) -> None:
    # A process the first command left running (or, with setsid and a parent gone, one
    # that escaped the kill of its cancelled command's tree) writes while no call runs:
    # the next answer says how much was dropped and holds its own output only, also in
    # what it streams.
    ready, go, said = (os.path.join(tmp_path, name) for name in ("ready", "go", "said"))
    for fifo in (ready, go, said):
        os.mkfifo(fifo)
    stray = f"({escape}sh -c 'echo > ready; read _ < go; echo STRAY; echo > said' &)"
    cancel = threading.Event()

    def cancel_once_ready() -> None:
        with open(ready) as up:
            up.read()
        cancel.set()

    waiter = threading.Thread(target=cancel_once_ready)
    waiter.start()
    if escape:
        first = shell.run(f"{stray}; sleep 600", timeout=60, output_limit=4096, cancel=cancel)
        assert first.cancelled, first
    else:
        run(shell, stray)
    waiter.join()
    with open(go, "w") as release:
        release.write("\n")
    with open(said) as written:
        assert written.read() == "\n"  # STRAY went out before this
    streamed: list[bytes] = []
    mine = shell.run("echo mine", timeout=30, output_limit=4096, on_output=streamed.append)
    assert (mine.exit_code, mine.stray_bytes, mine.output.text()) == (0, 6, "mine\n")
    assert b"".join(streamed) == b"mine\n"
    assert mine.exec_result(time.monotonic()).output == stray_note(6) + "mine\n"
    assert run(shell, "echo again") == "again\n"
