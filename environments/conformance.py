"""Conformance suite for :class:`~environments.base.Environment` backends.

Shipped in the package (as inspect_ai ships its sandbox tests) so that every
backend -- built-in or a plugin -- can prove it honours the contract::

    from environments import conformance
    failures = conformance.run_suite(lambda sid: MyEnvironment(sid))
    assert not failures, failures

Each check is a plain function taking ``make(session_id) -> Environment``; it
creates the sandboxes it needs, closes them, and raises ``AssertionError``
(or the backend's exception) on a violation. Checks observe the sandbox only
through the contract, so they run unchanged inside containers and on remote
hosts: process checks scan ``/proc`` *in the sandbox*. Waiting is done inside
the sandbox by a bounded poll on a condition, never by sleeping a fixed time.

A backend under test should use a short kill grace (``kill_grace`` ~0.5 s):
the timeout checks go through the full TERM -> KILL escalation.
"""

from __future__ import annotations

import secrets
import threading

from environments.conformance_shell import (
    check_command_may_redirect_its_own_output,
    check_command_sees_a_plain_shell,
    check_lost_cwd_runs_nothing,
    check_output_written_between_calls_is_not_the_next_commands,
    check_shell_variables_do_not_break_the_shell,
    check_state_in_any_bytes,
)
from environments.conformance_tools import (
    Check,
    Factory,
    count_processes,
    ok,
    run,
    sandbox,
    scratch_dir,
    wait_ended,
    wait_in_sandbox,
)
from environments.errors import WorkdirNotFound

__all__ = [
    "CHECKS",
    "Check",
    "Factory",
    "check_command_may_redirect_its_own_output",
    "check_command_sees_a_plain_shell",
    "check_lost_cwd_runs_nothing",
    "check_output_written_between_calls_is_not_the_next_commands",
    "check_shell_variables_do_not_break_the_shell",
    "check_state_in_any_bytes",
    "run_suite",
]

# -- checks -------------------------------------------------------------------


def check_exec_output(make: Factory) -> None:
    """Exact output, exit status, output without a trailing newline, stderr merged."""
    with sandbox(make) as env:
        result = run(env, "echo hello")
        assert (result.output, result.exit_code, result.timed_out) == ("hello\n", 0, False)
        assert run(env, "printf 'no newline'").output == "no newline"
        assert run(env, "echo out; echo err >&2").output == "out\nerr\n"
        assert run(env, "false").exit_code == 1
        empty = run(env, "true")
        assert (empty.output, empty.exit_code, empty.output_bytes) == ("", 0, 0)


def check_fast_calls_stay_framed(make: Factory) -> None:
    """Many quick calls in a row: every output exact, every state change kept.

    Guards the framing against races between the command's output and the shell's
    own markers (a fast command used to finish before its pid was reported)."""
    with sandbox(make) as env:
        for i in range(300):
            result = run(env, f"echo {i}; export SBX_CONF_N={i}")
            assert (result.output, result.exit_code) == (f"{i}\n", 0), (i, result)
        assert ok(env, 'echo "$SBX_CONF_N"') == "299\n"


def check_exit_status(make: Factory) -> None:
    """``exit N`` reports N and leaves the session (and its cwd) where it was."""
    with sandbox(make) as env:
        where = scratch_dir(env)
        ok(env, f"cd '{where}'")
        result = run(env, "exit 3")
        assert result.exit_code == 3, result
        assert ok(env, "pwd").strip() == where
        assert run(env, "(exit 42)").exit_code == 42
        assert ok(env, "echo still here") == "still here\n"


def check_state_persists(make: Factory) -> None:
    """``cd`` and ``export`` of one call are seen by the next; ``unset`` too."""
    with sandbox(make) as env:
        where = scratch_dir(env)
        result = run(env, f"cd '{where}' && export SBX_CONF_A='a b' SBX_CONF_B=\"it's\"")
        assert result.exit_code == 0 and result.cwd == where, result
        assert ok(env, 'pwd; echo "$SBX_CONF_A|$SBX_CONF_B"') == f"{where}\na b|it's\n"
        ok(env, "unset SBX_CONF_A")
        assert ok(env, 'echo "[${SBX_CONF_A-unset}]"') == "[unset]\n"
        assert ok(env, 'echo "$SBX_CONF_B"') == "it's\n"


def check_sessions_isolated(make: Factory) -> None:
    """State of one session is invisible to another."""
    with sandbox(make, "iso-a") as a, sandbox(make, "iso-b") as b:
        where = scratch_dir(a)
        ok(a, f"cd '{where}'; export SBX_CONF_ISO=secret")
        start_b = ok(b, "pwd").strip()
        assert start_b != where
        assert ok(b, 'echo "[${SBX_CONF_ISO-}]"') == "[]\n"
        assert ok(a, 'echo "$SBX_CONF_ISO"') == "secret\n"


def check_stdin_is_eof(make: Factory) -> None:
    """A command reading stdin gets EOF at once and cannot eat the control stream."""
    with sandbox(make) as env:
        assert ok(env, "cat; echo done") == "done\n"
        assert ok(env, 'read x; echo "rc=$?"') == "rc=1\n"
        assert ok(env, "echo after") == "after\n"


def check_large_output_truncated(make: Factory) -> None:
    """Output beyond ``output_limit`` keeps head and tail with a marker; the count is exact."""
    with sandbox(make) as env:
        cmd = "echo BEGIN; i=0; while [ $i -lt 3000 ]; do echo 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz; i=$((i+1)); done; echo END"  # noqa: E501
        result = run(env, cmd, output_limit=4000)
        assert result.truncated, result.output_bytes
        assert result.output_bytes == 6 + 3000 * 109 + 4
        assert result.output.startswith("BEGIN\n") and result.output.endswith("END\n")
        assert "omitted" in result.output
        assert len(result.output.encode()) < 4000 + 200
        small = run(env, "echo small", output_limit=4000)
        assert not small.truncated and small.output == "small\n"


def check_binary_output(make: Factory) -> None:
    """Invalid UTF-8 becomes U+FFFD; NUL bytes and valid multibyte text pass through."""
    with sandbox(make) as env:
        result = run(env, r"printf 'a\377b\000c\303\251'")
        assert result.output == "a\ufffdb\x00c\u00e9", repr(result.output)
        assert result.output_bytes == 7


def check_timeout_kills_tree(make: Factory) -> None:
    """A timeout kills the command's whole tree (TERM-ignoring ones too): 124, shell usable."""
    tag = str(40000 + secrets.randbelow(20000))
    with sandbox(make) as env:
        where = scratch_dir(env)
        ok(env, f"cd '{where}'; export SBX_CONF_KEEP=1")
        command = (
            f"sleep {tag}1 & sh -c 'sleep {tag}2' & "
            f"sh -c 'trap \"\" TERM; sleep {tag}3' & sleep {tag}4; echo never"
        )
        result = run(env, command, timeout=1)
        assert result.exit_code == 124 and result.timed_out, result
        assert "never" not in result.output
        assert wait_in_sandbox(
            env,
            "[ \"$(for f in /proc/[0-9]*/cmdline; do { tr '\\000' ' ' < \"$f\"; } 2>/dev/null;"
            f" echo; done | grep -c 'sleep {tag}[1234]')\" = 0 ]",
        ), "processes of the timed-out command survived"
        assert count_processes(env, f"sleep {tag}") == 0
        assert ok(env, 'pwd; echo "$SBX_CONF_KEEP"') == f"{where}\n1\n"


def check_cancel_kills_tree(make: Factory) -> None:
    """A set ``cancel`` event stops the call like a timeout: tree killed, 130, shell usable."""
    tag = str(60000 + secrets.randbelow(9999))
    with sandbox(make) as env:
        ok(env, "export SBX_CONF_CANCEL=kept")
        cancel = threading.Event()
        cancel.set()  # set before the call: deterministic, no timing involved
        result = run(env, f"sh -c 'sleep {tag}1' & sleep {tag}2; echo never", cancel=cancel)
        assert result.cancelled and result.exit_code == 130, result
        assert not result.timed_out and "never" not in result.output
        assert wait_in_sandbox(
            env,
            "[ \"$(for f in /proc/[0-9]*/cmdline; do { tr '\\000' ' ' < \"$f\"; } 2>/dev/null;"
            f" echo; done | grep -c 'sleep {tag}[12]')\" = 0 ]",
        ), "processes of the cancelled command survived"
        assert ok(env, 'echo "$SBX_CONF_CANCEL"') == "kept\n"


def check_stopped_shell_replaced(make: Factory) -> None:
    """A command that stops its own session shell ends with its timeout; the next call runs
    on a new shell with the session's state (``shell_restarted``), and the stopped shell is
    ended rather than left behind in the sandbox."""
    tag = str(70000 + secrets.randbelow(9999))
    with sandbox(make) as env:
        ok(env, "export SBX_CONF_WEDGE=kept")
        # The shell's pid and kernel start time: a pid alone may be another process's later.
        pid, start = ok(env, 'read -r l < /proc/$$/stat; set -- ${l##*) }; echo "$$ ${20}"').split()
        result = run(env, f"kill -STOP $$; sleep {tag}", timeout=1)
        assert result.timed_out and result.exit_code == 124, result
        after = run(env, 'echo "$SBX_CONF_WEDGE"')
        assert after.exit_code == 0 and after.output == "kept\n", after
        assert after.shell_restarted, after
        stopped = (
            f"{{ read -r l < /proc/{pid}/stat && set -- ${{l##*) }} && "
            f'[ "${{20}}" = {start} ] && [ "$1" = T ]; }} 2>/dev/null'
        )
        assert wait_in_sandbox(env, f"! {stopped}"), "the stopped shell was left behind"
        assert count_processes(env, f"sleep {tag}") == 0


def check_env_per_call(make: Factory) -> None:
    """``env=`` applies to that call only, with exact values."""
    with sandbox(make) as env:
        value = "two words 'quoted' $NOT_EXPANDED"
        assert ok(env, 'echo "$SBX_CONF_E"', env={"SBX_CONF_E": value}) == value + "\n"
        assert ok(env, 'echo "[${SBX_CONF_E-}]"') == "[]\n"


def check_workdir(make: Factory) -> None:
    """A workdir applies to one call; a missing one raises WorkdirNotFound and runs nothing."""
    with sandbox(make) as env:
        home = ok(env, "pwd").strip()
        where = scratch_dir(env)
        result = run(env, "pwd", workdir=where)
        assert result.output == where + "\n"
        assert ok(env, "pwd").strip() == home
        marker = f"{where}/ran"
        missing = f"{where}/does-not-exist"
        try:
            run(env, f"touch '{marker}'", workdir=missing)
        except WorkdirNotFound:
            pass
        else:
            raise AssertionError("a missing workdir did not raise WorkdirNotFound")
        assert ok(env, f"[ -e '{marker}' ] && echo ran || echo not-run") == "not-run\n"


def check_background(make: Factory) -> None:
    """spawn: detached, session cwd/env, output and status files; is_running; signal."""
    with sandbox(make) as env:
        where = scratch_dir(env)
        ok(env, f"cd '{where}'; export SBX_CONF_BG=inherited")
        quick = env.spawn(
            'pwd; echo "$SBX_CONF_BG $SBX_CONF_X"; exit 7',
            output_path=f"{where}/quick.out",
            status_path=f"{where}/quick.status",
            env={"SBX_CONF_X": "per-call"},
        )
        assert quick.pid > 0
        assert wait_in_sandbox(env, f"[ -e '{where}/quick.status' ]")
        assert env.read_file(quick.status_path) == b"7"
        assert env.read_file(quick.output_path) == f"{where}\ninherited per-call\n".encode()
        # The status is the wrapper's last write, not its exit: it may still run a moment.
        wait_ended(env, quick)
        assert not env.is_running(quick)

        slow = env.spawn(
            "echo started; exec sleep 600",
            output_path=f"{where}/slow.out",
            status_path=f"{where}/slow.status",
        )
        assert slow.pgid > 0
        assert env.is_running(slow)
        assert wait_in_sandbox(env, f"grep -q started '{where}/slow.out'")
        env.signal(slow, 15)
        assert wait_in_sandbox(
            env, f"! [ -d /proc/{slow.pid} ] || grep -q '^State:.*Z' /proc/{slow.pid}/status"
        )
        wait_ended(env, slow)
        assert not env.is_running(slow)
        # A handle whose start time does not match is never signalled.
        other = env.spawn(
            "exec sleep 600", output_path=f"{where}/o.out", status_path=f"{where}/o.status"
        )
        forged = other.model_copy(update={"start_time": (other.start_time or 0) + 1})
        assert not env.is_running(forged)
        env.signal(forged, 9)
        assert env.is_running(other)
        env.signal(other, 9)
        assert wait_in_sandbox(
            env, f"! [ -d /proc/{other.pid} ] || grep -q '^State:.*Z' /proc/{other.pid}/status"
        )
        try:
            env.spawn(
                "true",
                output_path=f"{where}/x",
                status_path=f"{where}/y",
                workdir=f"{where}/missing",
            )
        except WorkdirNotFound:
            pass
        else:
            raise AssertionError("spawn in a missing workdir did not raise WorkdirNotFound")


def check_files(make: Factory) -> None:
    """write_file/read_file round-trip any bytes; offset and limit; missing file errors."""
    with sandbox(make) as env:
        where = scratch_dir(env)
        data = bytes(range(256)) * 64 + b"\n\x00tail"
        path = f"{where}/blob.bin"
        env.write_file(path, data)
        assert env.read_file(path) == data
        assert env.read_file(path, offset=10, limit=5) == data[10:15]
        assert env.read_file(path, offset=len(data) - 4) == b"tail"
        assert ok(env, f"wc -c < '{path}'").strip() == str(len(data))
        env.write_file(path, b"replaced")
        assert ok(env, f"cat '{path}'") == "replaced"
        env.write_file(f"{where}/empty", b"")
        assert env.read_file(f"{where}/empty") == b""
        try:
            env.read_file(f"{where}/missing")
        except FileNotFoundError:
            pass
        else:
            raise AssertionError("reading a missing file did not raise FileNotFoundError")


def check_close_idempotent(make: Factory) -> None:
    """close() twice is fine, also on a sandbox that never ran anything."""
    env = make(f"close-{secrets.token_hex(4)}")
    assert ok(env, "echo x") == "x\n"
    env.close()
    env.close()
    unused = make(f"close-{secrets.token_hex(4)}")
    unused.close()
    unused.close()


CHECKS: dict[str, Check] = {
    name.removeprefix("check_"): fn
    for name, fn in sorted(globals().items())
    if name.startswith("check_") and callable(fn)
}
"""Every check by short name."""


def run_suite(make: Factory, only: list[str] | None = None) -> dict[str, BaseException]:
    """Run the checks (all, or those named in ``only``); return the failures by name."""
    failures: dict[str, BaseException] = {}
    for name, check in CHECKS.items():
        if only is not None and name not in only:
            continue
        try:
            check(make)
        except Exception as exc:
            failures[name] = exc
    return failures
