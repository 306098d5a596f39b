"""pty input read as a program without a line editor receives it, and input after the line
editor was reconfigured."""

from __future__ import annotations

import pytest

from registry.approval import ApprovalConfigSource, ApprovalGuard, MemoryApprovalStore
from registry.approval.pty import PtyLineBuffer, _complete
from registry.approval.pty_cooked import CookedLineBuffer


def cooked(*writes: str) -> list[str]:
    buf = CookedLineBuffer(_complete, 1000)
    return [text for w in writes for text, done in buf.feed(w) if done]


@pytest.mark.parametrize(
    ("writes", "expected"),
    [
        (("rm -rf DIR \x01#\n",), "rm -rf DIR \x01#"),  # Ctrl-A is a character
        (("DIR\x1b[Hrm -rf \n",), "DIR\x1b[Hrm -rf "),  # so is an escape sequence
        (("rm -rf DIRX\x7f\r",), "rm -rf DIR"),  # DEL erases; CR is Enter
        (("rm -rf DIR\x08\n",), "rm -rf DIR\x08"),  # ^H is not the erase character
        (("echo hi\x15rm -rf DIR\n",), "rm -rf DIR"),
        (("rm -rf DIR x/y..\x17\n",), "rm -rf DIR x/"),  # n_tty's word erase
        (("safe\x03", "rm -rf DIR\n"), "rm -rf DIR"),
        (("rm -rf \x16\x7fDIR\n",), "rm -rf \x7fDIR"),
        (("rm\x04 -rf DIR\n",), "rm -rf DIR"),
        (("if true; then\n", "rm -rf DIR; fi\n"), "if true; then\nrm -rf DIR; fi"),
    ],
)
def test_canonical_mode_is_reconstructed(writes: tuple[str, ...], expected: str) -> None:
    assert cooked(*writes)[-1] == expected


def test_both_readings_are_judged_and_peek_changes_nothing() -> None:
    buf = PtyLineBuffer()
    both = buf.peek_both("rm -rf DIR \x01#\n")
    assert [line.text for line in both] == ["#rm -rf DIR ", "rm -rf DIR \x01#"]
    assert [line.text for line in buf.peek_both("ls -l\n")] == ["ls -l"]  # read alike: once
    assert buf.pending == ""


def guard() -> ApprovalGuard:
    return ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(None))


def test_guard_refuses_what_a_shell_without_line_editor_would_run() -> None:
    decision = guard().check_pty_write(
        PtyLineBuffer(), "rm -rf src \x01#\n", session_id="s", backend="local"
    )
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "recursive_delete"


@pytest.mark.parametrize(
    "line",
    [
        'bind \'"\\C-a": "rm -rf src\\n"\'',
        "X=1 builtin bind -x '\"\\C-a\": ls'",
        "stty -icanon",
        "set -o vi",
        "echo hi; set +o emacs",
        "command bindkey -s x ls",
    ],
)
def test_reconfiguring_the_line_editor_asks_and_untrusts_every_later_key(line: str) -> None:
    g = guard()
    buf = PtyLineBuffer()
    decision = g.check_pty_write(buf, line + "\n", session_id="s", backend="local")
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "pty_input_unmodelled" and decision.approval_id
    assert buf.rebound is None  # refused: not applied
    g.approve(decision.approval_id, "once", session_id="s")
    assert g.check_pty_write(buf, line + "\n", session_id="s", backend="local").allowed
    assert buf.rebound is not None
    for keys in ("\x01", " ", "ls\n"):
        later = g.check_pty_write(buf, keys, session_id="s", backend="local")
        assert later.outcome == "approval_required", repr(keys)
    buf.reset()
    assert g.check_pty_write(buf, "ls\n", session_id="s", backend="local").allowed


@pytest.mark.parametrize("line", ["echo bind", "set -e", "grep stty notes.txt", "set -- vim"])
def test_mentions_do_not_rebind(line: str) -> None:
    buf = PtyLineBuffer()
    buf.feed(line + "\n")
    assert buf.rebound is None
