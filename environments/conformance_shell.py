"""Conformance checks of what a command can do to its own session shell: end itself by a
signal, trace itself, send its own output elsewhere or close it, leave state the shell
must carry in bytes that are not UTF-8, export variables that change how a shell reads
its input, remove its own directory, leave a process running that writes after it ended.
None of it may cost the session its shell, its state or a truthful answer."""

from __future__ import annotations

from environments.conformance_tools import (
    Factory,
    ok,
    run,
    sandbox,
    scratch_dir,
    wait_for_content,
)
from environments.errors import InvalidCommand, WorkdirNotFound


def check_command_sees_a_plain_shell(make: Factory) -> None:
    """A command ended by a signal reports 128+N; it has no positional parameters; a
    trace (``set -x``) shows nothing of sbx's own; names the shell manages are refused
    as per-call variables."""
    with sandbox(make) as env:
        killed = run(env, "sh -c 'kill -TERM $PPID'; echo not reached")
        assert (killed.exit_code, killed.output) == (143, ""), killed
        assert run(env, "false; sh -c 'kill -HUP $PPID'").exit_code == 129
        assert ok(env, 'echo "$#[${1-}][${2-}]"', workdir="/") == "0[][]\n"
        traced = run(env, "set -x; echo traced")
        assert traced.exit_code == 0 and "traced\n" in traced.output, traced
        assert "__sbx" not in traced.output and "sbx_" not in traced.output, traced
        for name in ("PWD", "__sbx_a"):
            try:
                run(env, "true", env={name: "/"})
            except InvalidCommand:
                continue
            raise AssertionError(f"per-call {name} was accepted")
        assert ok(env, "echo next") == "next\n"


def check_state_in_any_bytes(make: Factory) -> None:
    """A variable and a directory whose names or values are not UTF-8 are session state
    like any other, and the session goes on."""
    with sandbox(make) as env:
        ok(env, f"cd '{scratch_dir(env)}'")
        ok(env, "d=\"d$(printf '\\377')\"; mkdir \"$d\" && cd \"$d\" && "
                "export SBX_CONF_RAW=\"x$(printf '\\377')\"")  # fmt: skip
        check = (
            '[ "$SBX_CONF_RAW" = "x$(printf \'\\377\')" ] && '
            "case $PWD in */d$(printf '\\377')) echo same;; esac"
        )
        assert ok(env, check) == "same\n"
        assert ok(env, "unset SBX_CONF_RAW; echo ${SBX_CONF_RAW-gone}") == "gone\n"


def check_shell_variables_do_not_break_the_shell(make: Factory) -> None:
    """``IFS`` and ``TMOUT`` exported beside a large state (which moves into the session
    shell itself) change nothing of how calls are answered: a command's own EXIT trap,
    ``exec`` and a timeout behave as without them, on the same shell."""
    fill = "f" * 3000
    with sandbox(make) as env:
        ok(env, f"export IFS=/ TMOUT=30 SBX_CONF_FILL={fill}")
        trapped = run(env, "trap 'echo cleanup' EXIT; echo done", timeout=20)
        assert (trapped.exit_code, trapped.output) == (0, "done\ncleanup\n"), trapped
        assert ok(env, "exec echo replaced") == "replaced\n"
        assert run(env, "sleep 30", timeout=1).timed_out
        after = run(env, 'echo "${#SBX_CONF_FILL} $TMOUT"')
        assert (after.output, after.shell_restarted) == ("3000 30\n", False), after


def check_lost_cwd_runs_nothing(make: Factory) -> None:
    """When the session's working directory disappears, the next command runs nowhere
    else: it raises WorkdirNotFound naming the session's new cwd (where it started), and
    the call after runs there."""
    with sandbox(make) as env:
        start = ok(env, "pwd").strip()
        ok(env, f"cd '{scratch_dir(env)}' && mkdir gone && cd gone && rmdir ../gone")
        try:
            run(env, "touch should-not-exist")
        except WorkdirNotFound as exc:
            assert exc.cwd == start, exc
        else:
            raise AssertionError("a command ran although the session's cwd is gone")
        assert ok(env, "pwd").strip() == start
        assert ok(env, "[ -e should-not-exist ] || echo absent") == "absent\n"


def check_command_may_redirect_its_own_output(make: Factory) -> None:
    """A command that sends its stdout to a file (``exec >build.log``) or closes it keeps
    its changes to the session's state; the file gets the command's output only, and the
    answer shows no error of sbx's own."""
    with sandbox(make) as env:
        where = ok(env, f"cd '{scratch_dir(env)}' && pwd").strip()
        sent = run(env, f"cd '{where}' && exec >build.log 2>&1; export SBX_CONF_LOG=1; echo built")
        assert (sent.exit_code, sent.output) == (0, ""), sent
        assert ok(env, 'cat build.log; echo "$SBX_CONF_LOG $PWD"') == f"built\n1 {where}\n"
        closed = run(env, "export SBX_CONF_SHUT=2; cd /; exec >&-")
        assert (closed.exit_code, closed.output) == (0, ""), closed
        both = run(env, "export SBX_CONF_BOTH=3; exec >&- 2>&-")
        assert (both.exit_code, both.output) == (0, ""), both
        assert ok(env, 'echo "$SBX_CONF_SHUT $SBX_CONF_BOTH $PWD"') == "2 3 /\n"


def check_output_written_between_calls_is_not_the_next_commands(make: Factory) -> None:
    """What a process an earlier command left running writes while no call runs does not
    show as the next command's output (that answer may say it was dropped); the answer
    after holds only its own command's output."""
    with sandbox(make) as env:
        where = scratch_dir(env)
        ok(
            env,
            # Only the writer goes to the background (`a && b &` would put all of it there).
            f"cd '{where}' || exit 1; : >said; "
            "(until [ -e go ]; do sleep 0.02; done; echo STRAY; echo written >said) &",
        )
        env.write_file(f"{where}/go", b"")
        assert wait_for_content(env, f"{where}/said", b"written\n"), "the process never wrote"
        mine = run(env, "echo mine")
        assert (mine.exit_code, mine.output.endswith("mine\n")) == (0, True), mine
        assert "STRAY" not in mine.output, mine
        assert ok(env, "echo again") == "again\n"
