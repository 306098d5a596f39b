"""LocalEnvironment: the session shell's behaviour, each case of the walking-skeleton issue."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.errors import InvalidCommand, WorkdirNotFound
from tests.fixtures_backends import require_jail
from tests.helpers import process_gone


@pytest.fixture(params=["bwrap", "none"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalEnvironment]:
    """The session shell in its jail, and without one."""
    if request.param == "bwrap":
        require_jail()
    config = LocalConfig(cwd=str(tmp_path), kill_grace=0.5, isolation=request.param)
    e = LocalEnvironment("test-session", config)
    yield e
    e.close()


@pytest.fixture
def host_env(tmp_path: Path) -> Iterator[LocalEnvironment]:
    """Without a jail: for checks that read the command's pids on the host."""
    e = LocalEnvironment("test-session", LocalConfig(cwd=str(tmp_path), kill_grace=0.5,
                                                     isolation="none"))  # fmt: skip
    yield e
    e.close()


def test_echo_exact_output(env: LocalEnvironment, tmp_path: Path) -> None:
    r = env.exec("echo hi")
    assert (r.output, r.exit_code, r.cwd, r.truncated) == ("hi\n", 0, str(tmp_path), False)


def test_stderr_is_interleaved(env: LocalEnvironment) -> None:
    r = env.exec("echo out; echo err >&2; echo out2")
    assert r.output == "out\nerr\nout2\n"


def test_cd_and_export_persist_within_session(env: LocalEnvironment, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert env.exec("cd sub && export GREETING='a b'\"'\"'c'").exit_code == 0
    r = env.exec('pwd; printf "%s\\n" "$GREETING"')
    assert r.output == f"{tmp_path / 'sub'}\na b'c\n"
    assert r.cwd == str(tmp_path / "sub")


def test_unset_persists(env: LocalEnvironment) -> None:
    env.exec("export GONE=1")
    env.exec("unset GONE")
    assert env.exec('echo "[${GONE-unset}]"').output == "[unset]\n"


def test_multiline_values_and_special_characters_persist(env: LocalEnvironment) -> None:
    env.exec("export ML=$'line1\\nline2\\t$x \\\\ \"q\"'")
    assert env.exec('printf "%s" "$ML"').output == 'line1\nline2\t$x \\ "q"'


def test_sessions_are_isolated(tmp_path: Path) -> None:
    a = LocalEnvironment("a", LocalConfig(cwd=str(tmp_path)))
    b = LocalEnvironment("b", LocalConfig(cwd=str(tmp_path)))
    try:
        a.exec("cd / && export ONLY_A=1")
        r = b.exec('pwd; echo "[${ONLY_A-}]"')
        assert r.output == f"{tmp_path}\n[]\n"
        assert a.exec('pwd; echo "[$ONLY_A]"').output == "/\n[1]\n"
    finally:
        a.close()
        b.close()


def test_stdin_reads_eof_immediately(env: LocalEnvironment) -> None:
    r = env.exec('cat; read x; echo "rc=$? x=[$x]"', timeout=30)
    assert (r.output, r.exit_code, r.timed_out) == ("rc=1 x=[]\n", 0, False)


def test_exit_status_reported_and_session_continues(env: LocalEnvironment) -> None:
    env.exec("cd / && export KEEP=yes")
    r = env.exec("echo before; exit 3")
    assert (r.output, r.exit_code) == ("before\n", 3)
    r = env.exec('pwd; echo "$KEEP"')
    assert (r.output, r.shell_restarted) == ("/\nyes\n", False)


def test_exit_after_cd_keeps_the_new_state(env: LocalEnvironment) -> None:
    r = env.exec("cd / && exit 0")
    assert r.cwd == "/"
    assert env.exec("pwd").output == "/\n"


def test_output_without_trailing_newline(env: LocalEnvironment) -> None:
    assert env.exec("printf 'no newline'").output == "no newline"
    assert env.exec("printf ''").output == ""


def test_invalid_utf8_becomes_replacement_characters(env: LocalEnvironment) -> None:
    r = env.exec("printf 'ok \\377\\376 \\303\\251 end'")
    assert r.output == "ok \ufffd\ufffd é end"


def test_binary_output_with_nul_bytes(env: LocalEnvironment) -> None:
    r = env.exec("printf 'a\\000b\\001c'")
    assert r.output == "a\x00b\x01c"


def test_large_output_keeps_head_and_tail(env: LocalEnvironment) -> None:
    r = env.exec("seq 1 100000", output_limit=1000)
    assert r.truncated
    assert r.output_bytes == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert r.output.startswith("1\n2\n3\n")
    assert r.output.endswith("99999\n100000\n")
    omitted = int(re.search(r"\[sbx: (\d+) bytes of output omitted\]", r.output).group(1))  # type: ignore[union-attr]
    assert omitted == r.output_bytes - 1000


def test_200mb_of_output_keeps_memory_bounded(env: LocalEnvironment) -> None:
    me = psutil.Process()
    before = me.memory_info().rss
    r = env.exec("head -c 200000000 /dev/zero | tr '\\0' x", output_limit=10_000, timeout=120)
    grown = me.memory_info().rss - before
    assert (r.exit_code, r.output_bytes, r.truncated) == (0, 200_000_000, True)
    assert len(r.output.encode()) < 10_200
    assert grown < 8 * 1024 * 1024, f"worker grew by {grown} bytes"


def test_timeout_kills_the_whole_tree_and_session_survives(
    host_env: LocalEnvironment, tmp_path: Path
) -> None:
    host_env.exec("export SURVIVES=1")
    pidfile = tmp_path / "pids"
    # A child, a grandchild, and a grandchild that ignores TERM: all must die.
    r = host_env.exec(
        f"sleep 1000 & echo $! >> {pidfile}; "
        f"(trap '' TERM; sleep 1000 & echo $! >> {pidfile}; wait) & echo $! >> {pidfile}; "
        f"sleep 1000",
        timeout=1,
    )
    assert (r.exit_code, r.timed_out) == (124, True)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 3
    assert [pid for pid in pids if not process_gone(pid)] == []
    r = host_env.exec('echo "alive $SURVIVES"')
    assert (r.output, r.exit_code) == ("alive 1\n", 0)


def test_timeout_of_a_shell_builtin_loop(env: LocalEnvironment) -> None:
    r = env.exec("while :; do :; done", timeout=1)
    assert (r.exit_code, r.timed_out) == (124, True)
    assert env.exec("echo ok").output == "ok\n"


def test_timeout_with_term_ignored_escalates_to_kill(env: LocalEnvironment) -> None:
    r = env.exec("trap '' TERM; echo armed; while :; do sleep 1; done", timeout=1)
    assert (r.exit_code, r.output) == (124, "armed\n")
    assert env.exec("echo ok").output == "ok\n"


def test_background_job_keeping_stdout_open_does_not_hold_the_call(
    host_env: LocalEnvironment, tmp_path: Path
) -> None:
    r = host_env.exec(f"sleep 1000 & echo $! > {tmp_path}/bg; echo started", timeout=60)
    assert (r.output, r.exit_code, r.timed_out) == ("started\n", 0, False)
    pid = int((tmp_path / "bg").read_text())
    assert not process_gone(pid)
    os.kill(pid, 9)


def test_missing_workdir_is_an_error_and_nothing_runs(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(WorkdirNotFound, match="does not exist"):
        env.exec(f"touch {marker}", workdir=str(tmp_path / "nope"))
    assert not marker.exists()
    assert env.exec("echo fine").output == "fine\n"


def test_workdir_applies_to_one_call(env: LocalEnvironment, tmp_path: Path) -> None:
    r = env.exec("pwd", workdir="/")
    assert r.output == "/\n"
    assert r.cwd == str(tmp_path)
    assert env.exec("pwd").output == f"{tmp_path}\n"


def test_per_call_env_is_not_session_state(env: LocalEnvironment) -> None:
    assert env.exec('echo "$ONE_CALL"', env={"ONE_CALL": "x"}).output == "x\n"
    assert env.exec('echo "[${ONE_CALL-}]"').output == "[]\n"


def test_nul_in_command_is_rejected(env: LocalEnvironment) -> None:
    with pytest.raises(InvalidCommand):
        env.exec("echo a\x00b")


def test_syntax_error_is_reported_not_fatal(env: LocalEnvironment) -> None:
    r = env.exec("if then fi (")
    assert r.exit_code == 2
    assert "syntax error" in r.output
    assert env.exec("echo ok").output == "ok\n"


def test_killed_shell_is_restarted_with_state(env: LocalEnvironment) -> None:
    env.exec("cd / && export KEEP=1")
    # $$ is the session shell, even in its subshells; the command itself ends normally.
    r = env.exec("kill -9 $$; echo after")
    assert (r.output, r.exit_code) == ("after\n", 0)
    r = env.exec('pwd; echo "$KEEP"')
    assert (r.output, r.shell_restarted) == ("/\n1\n", True)


def test_markers_never_leak_into_output(env: LocalEnvironment) -> None:
    r = env.exec("set >/dev/null; declare -f >/dev/null; echo clean")
    assert r.output == "clean\n"


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_only_the_baseline_and_forwarded_variables_reach_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    if isolation == "bwrap":
        require_jail()
    monkeypatch.setenv("SBX_SECRET_KEY", "s3cr3t-signing-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:db-pass@db/x")
    monkeypatch.setenv("HARMLESS_SETTING", "not-forwarded")
    monkeypatch.setenv("FORWARDED_SETTING", "visible")
    monkeypatch.setenv("LANG", "C.UTF-8")
    config = LocalConfig(cwd=str(tmp_path), isolation=isolation,  # type: ignore[arg-type]
                         forward_env=("FORWARDED_SETTING",))  # fmt: skip
    e = LocalEnvironment("s", config)
    try:
        out = e.exec("env").output
    finally:
        e.close()
    for leaked in ("s3cr3t", "aws-secret", "db-pass", "not-forwarded"):
        assert leaked not in out
    assert "FORWARDED_SETTING=visible" in out and "LANG=C.UTF-8" in out
    assert "PATH=" in out and "HOME=" in out

def test_close_is_idempotent(env: LocalEnvironment) -> None:
    env.exec("echo hi")
    env.close()
    env.close()


def test_cancel_kills_the_tree_and_reports_130(
    host_env: LocalEnvironment, tmp_path: Path
) -> None:
    import threading

    from tests.helpers import wait_until

    started = tmp_path / "started"
    cancel = threading.Event()
    results = []
    t = threading.Thread(
        target=lambda: results.append(
            host_env.exec(f"sleep 1000 & echo $! > {started}; wait", timeout=600, cancel=cancel)
        )
    )
    t.start()
    wait_until(lambda: started.exists() and started.read_text().strip() != "", 30, "start")
    cancel.set()
    t.join(timeout=60)
    (r,) = results
    assert (r.exit_code, r.cancelled, r.timed_out) == (130, True, False)
    assert process_gone(int(started.read_text()))
    assert host_env.exec("echo usable").output == "usable\n"


def test_killed_shell_with_a_lingering_job_is_replaced(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    env.exec("export KEEP=2")
    # The job lingers until the test ends (then the file goes, and so does the job).
    (tmp_path / "alive").touch()
    job = "while [ -e alive ]; do sleep 0.2; done >/dev/null 2>&1 & echo started"
    try:
        assert env.exec(job).output == "started\n"
        env.exec("kill -9 $$")
        r = env.exec('echo "$KEEP"', timeout=30)
        assert (r.output, r.exit_code, r.shell_restarted) == ("2\n", 0, True)
    finally:
        (tmp_path / "alive").unlink()


def test_a_resting_session_keeps_its_state_in_a_new_shell(tmp_path: Path) -> None:
    env = LocalEnvironment("rest", LocalConfig(cwd=str(tmp_path)))
    try:
        (tmp_path / "sub").mkdir()
        assert env.exec("cd sub && export KEPT='a b'").exit_code == 0
        before = env.shell_identity()
        env.rest()
        assert env.shell_identity() is None  # no shell while it rests
        result = env.exec('echo "$KEPT"; pwd')
        assert result.output == f"a b\n{tmp_path / 'sub'}\n"
        assert not result.shell_restarted  # planned: nothing to tell the model
        after = env.shell_identity()
        assert before is not None and after is not None and after.pid != before.pid
    finally:
        env.close()
