"""The local backend's bubblewrap jail: what a sandbox sees, reaches and leaves behind."""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.backends.local.jail import Jail, probe
from environments.backends.local.sessiondirs import SessionDirs, reap_sessions
from environments.errors import BackendUnavailable
from tests.fixtures_backends import require_jail
from tests.helpers import wait_until


@pytest.fixture(autouse=True)
def _jail() -> None:
    require_jail()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "jails"


@pytest.fixture
def env(workspace: Path, state: Path) -> Iterator[LocalEnvironment]:
    e = LocalEnvironment("jailed", LocalConfig(cwd=str(workspace), state_dir=str(state),
                                               kill_grace=0.5))  # fmt: skip
    yield e
    e.close()


def out(env: LocalEnvironment, command: str) -> str:
    return env.exec(command, timeout=60).output


def test_the_jail_sees_its_workspace_and_its_own_tmp_home_and_proc(
    env: LocalEnvironment, workspace: Path
) -> None:
    (workspace / "mine").write_text("workspace file\n")
    assert out(env, "pwd; cat mine") == f"{workspace}\nworkspace file\n"
    assert out(env, "echo hi > /tmp/t && cat /tmp/t; echo $TMPDIR") == "hi\n/tmp\n"
    assert out(env, 'touch "$HOME/h" && ls "$HOME"') == "h\n"
    assert not Path("/tmp/t").exists() or Path("/tmp/t").read_text() != "hi\n"
    procs = out(env, "ls /proc | grep -c '^[0-9]'")
    assert int(procs) < 10  # the jail's init, shell and this command: nothing of the host
    assert out(env, "id -u") == f"{os.geteuid()}\n"
    assert out(env, "grep CapEff /proc/self/status").split()[1] == "0" * 16


def test_the_host_is_read_only_and_its_credentials_masked(env: LocalEnvironment) -> None:
    r = env.exec("touch /usr/sbx-was-here; echo rc=$?; cat /etc/shadow | wc -c")
    assert "rc=1" in r.output and r.output.rstrip().endswith("0")
    assert not Path("/usr/sbx-was-here").exists()
    assert out(env, "ls /home /root /var 2>&1 | grep -c 'No such file' || true").strip() != "0"


def test_network_none_has_only_loopback(env: LocalEnvironment) -> None:
    interfaces = out(env, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert interfaces == "lo\n"


def test_hidden_paths_are_masked_even_inside_the_workspace(
    workspace: Path, state: Path
) -> None:
    private = workspace / "state-of-the-worker"
    private.mkdir()
    (private / "secret.key").write_text("k3y")
    config = LocalConfig(cwd=str(workspace), state_dir=str(state), hide=(str(private),))
    e = LocalEnvironment("hide", config)
    try:
        r = e.exec(f"ls -A {private}; cat {private}/secret.key; echo x > {private}/new")
        assert "k3y" not in r.output and r.exit_code != 0
        assert sorted(os.listdir(private)) == ["secret.key"]
        with pytest.raises(FileNotFoundError):
            e.read_file(f"{private}/secret.key")
    finally:
        e.close()


def test_layouts_that_would_expose_what_they_hide_are_refused(
    workspace: Path, state: Path, tmp_path: Path
) -> None:
    inside = state.parent / "inside-private"
    inside.mkdir()
    for config, why in (
        (LocalConfig(cwd=str(inside), state_dir=str(state), hide=(str(state.parent),)), "inside"),
        (LocalConfig(cwd="/tmp", state_dir=str(state)), "/tmp"),
        (LocalConfig(cwd=str(workspace), state_dir=str(state), binds=(str(tmp_path / "no"),)),
         "not a directory"),
    ):  # fmt: skip
        with pytest.raises(BackendUnavailable, match=why):
            Jail(config, "s", config.cwd or "/", "/home/sbx")


def test_files_are_reached_through_the_jail_never_through_a_planted_link(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    secret = tmp_path / "worker-secret"
    secret.write_text("not for the sandbox")
    out(env, f"ln -s {secret} /tmp/link; mkdir -p /tmp/d; ln -s {tmp_path} /tmp/dirlink")
    for path in ("/tmp/link", "/tmp/dirlink/worker-secret"):
        with pytest.raises(OSError) as raised:
            env.read_file(path)
        assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)
    env.write_file("/tmp/link", b"replaces the link itself")  # renamed over it, not through
    assert secret.read_text() == "not for the sandbox"
    assert out(env, "[ -L /tmp/link ] || cat /tmp/link") == "replaces the link itself"
    with pytest.raises(FileNotFoundError):
        env.read_file("/proc/1/environ")  # the jail's /proc is no host directory
    with pytest.raises(OSError) as raised:
        env.write_file("/usr/sbx-was-here", b"x")
    assert raised.value.errno == errno.EROFS
    env.write_file("/tmp/d/f", b"through the jail")
    assert out(env, "cat /tmp/d/f") == "through the jail"


def test_a_timeout_kills_the_tree_by_the_hosts_numbers(env: LocalEnvironment) -> None:
    env.exec("echo warm")
    assert env._channel is not None
    jail = psutil.Process(env._channel.proc.pid)
    before = {p.pid for p in jail.children(recursive=True)}
    r = env.exec("sleep 1001 & sh -c 'trap \"\" TERM; sleep 1002' & sleep 1003", timeout=1)
    assert (r.exit_code, r.timed_out) == (124, True)
    left = [p for p in jail.children(recursive=True) if p.pid not in before]
    # The shell forked the next command's subshell already: a copy of itself, waiting.
    assert [p.cmdline() for p in left if p.is_running() and not _waiting_subshell(p)] == []
    assert out(env, "echo alive") == "alive\n"


def _waiting_subshell(p: psutil.Process) -> bool:
    try:
        parent = p.parent()
        return parent is not None and parent.cmdline() == p.cmdline()
    except psutil.Error:
        return False


def test_background_process_pids_are_the_hosts_and_outlive_the_shell(
    env: LocalEnvironment, state: Path
) -> None:
    out_path, status_path = env.process_paths("pbg", "/unused-spool")
    spawned = env.spawn("trap 'echo got-term; exit 9' TERM; echo up; while :; do sleep 1; done",
                        output_path=out_path, status_path=status_path)  # fmt: skip
    proc = psutil.Process(spawned.pid)
    assert proc.pid == spawned.pgid and os.getpgid(proc.pid) == spawned.pgid
    wait_until(lambda: b"up" in env.read_file(out_path), 30, "the process to start")
    dirs = env.jail.dirs if env.jail else None
    assert dirs is not None
    env.close()  # the session shell goes; the background process and its files stay
    assert env.is_running(spawned) and dirs.root.exists()
    assert env.signal(spawned, signal.SIGTERM)
    wait_until(lambda: not env.is_running(spawned), 30, "the process to end")
    assert Path(status_path).read_text() == "9"
    output = Path(out_path).read_bytes()  # the command's shell may say "Terminated" between
    assert output.startswith(b"up\n") and output.endswith(b"got-term\n")
    # The jail's bubblewrap outside the namespace holds the session's lock until it has
    # seen its init end, a moment after the process did.
    wait_until(dirs.remove_if_unused, 30, "the jail to let its directories go")
    assert not dirs.root.exists()


def test_pty_process_runs_in_the_jail_and_takes_input(env: LocalEnvironment) -> None:
    out_path, status_path = env.process_paths("ppty", "/unused-spool")
    spawned = env.spawn_on_pty('read line; echo "got $line on $(tty)"; ls /proc | wc -l',
                               output_path=out_path, status_path=status_path)  # fmt: skip
    assert env.write_input(spawned, b"hello\n") == 6
    wait_until(lambda: Path(status_path).exists(), 30, "the pty process to end")
    text = Path(out_path).read_text()
    assert "got hello on /dev/pts/" in text
    assert Path(status_path).read_text() == "0"


def test_session_directories_are_swept_when_idle_and_unused(state: Path) -> None:
    idle = SessionDirs.create(state, "idle-session")
    kept = SessionDirs.create(state, "kept-session")
    busy = SessionDirs.create(state, "busy-session")
    old = time.time() - 7200
    for dirs in (idle, kept, busy):
        os.close(dirs.hold())  # creates the lock file
        os.utime(dirs.lock, (old, old))
    holder = busy.hold()
    try:
        removed = reap_sessions(state, 3600, keep=lambda sid: sid == "kept-session")
    finally:
        os.close(holder)
    assert removed == ["idle-session"]
    assert not idle.root.exists() and kept.root.exists() and busy.root.exists()


def test_no_jail_no_session(workspace: Path) -> None:
    config = LocalConfig(cwd=str(workspace), bwrap="/nonexistent/bwrap")
    ok, why = probe(config)
    assert not ok and "bubblewrap" in why
    with pytest.raises(BackendUnavailable, match="SBX_LOCAL_ISOLATION=none"):
        LocalEnvironment("refused", config)
    unjailed = LocalEnvironment("trusted", config.model_copy(update={"isolation": "none"}))
    try:
        assert unjailed.exec("echo runs").output == "runs\n"
    finally:
        unjailed.close()
    assert LocalEnvironment.availability(config.model_copy(update={"isolation": "none"}))[
        1
    ].endswith("(no isolation, trusted code only)")


def test_a_stale_jailed_shell_is_ended_by_its_hosts_numbers(
    env: LocalEnvironment, workspace: Path, state: Path
) -> None:
    """Another worker's jail of the same session (its worker died mid-command) is ended
    whole; the live shell's own identity is never ended."""
    env.exec("echo started")
    stale = env.shell_identity()
    assert stale is not None and env._channel is not None
    jail = psutil.Process(stale.pid)
    members = [jail, *jail.children(recursive=True)]
    successor = LocalEnvironment("jailed", LocalConfig(cwd=str(workspace), state_dir=str(state)))
    try:
        successor.exec("echo successor")
        own = successor.shell_identity()
        assert own is not None and not successor.end_stale_shell(own)
        assert successor.end_stale_shell(stale)
        wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                   for p in members), 30, "the stale jail to end")  # fmt: skip
        assert successor.exec("echo still here").output == "still here\n"
    finally:
        successor.close()


def test_a_worker_cwd_that_may_not_be_a_workspace_is_left_out(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Services start in / (systemd) or in their SBX_HOME (the image): sessions then start in
    their own home; a configured workspace like that is refused."""
    monkeypatch.chdir("/")
    e = LocalEnvironment("svc", LocalConfig(state_dir=str(state)))
    try:
        out = e.exec("pwd; ls /srv /opt 2>&1 | grep -c 'No such'").output
        assert out == f"{e._env['HOME']}\n2\n"  # its home; nothing of the host's /
    finally:
        e.close()
    with pytest.raises(BackendUnavailable, match="SBX_LOCAL_CWD"):
        LocalEnvironment("svc", LocalConfig(cwd="/", state_dir=str(state)))
