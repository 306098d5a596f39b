"""pty input is judged per line the shell will run, not per write."""

from __future__ import annotations

import pytest

from registry.approval import (
    ApprovalConfigSource,
    ApprovalGuard,
    CommandTooLong,
    MemoryApprovalStore,
    PtyLineBuffer,
)


def lines(*writes: str) -> list[str]:
    buf = PtyLineBuffer()
    out: list[str] = []
    for w in writes:
        out.extend(line.text for line in buf.feed(w) if line.complete)
    return out


@pytest.mark.parametrize(
    ("writes", "expected"),
    [
        (("r", "m -rf DIR\n"), "rm -rf DIR"),
        (("rm -rf DIR\r",), "rm -rf DIR"),
        (("rm -rf DIR\r\n",), "rm -rf DIR"),
        (("ls -l\x7f\x7f", "rm -rf DIR\n"), "ls rm -rf DIR"),
        (("echo hi\x15rm -rf DIR\n",), "rm -rf DIR"),
        (("xrm\x01\x04\x05 -rf DIR\n",), "rm -rf DIR"),
        (("DIR\x01rm -rf \n",), "rm -rf DIR"),
        (("DIR\x1b[Hrm -rf \r",), "rm -rf DIR"),
        (("DIR", "\x1b", "[", "H", "rm -rf \r"), "rm -rf DIR"),
        (("rm -rf DIRX\x1b[D\x1b[3~\n",), "rm -rf DIR"),
        (("rm -rf DIR junk\x17\x08\n",), "rm -rf DIR"),
        (("junk rm -rf DIR\x01\x1bd\x04\n",), "rm -rf DIR"),
        (("rm -rf DIR\x0b\x01\x0b\x19\n",), "rm -rf DIR"),
        (("mr -rf DIR\x01\x06\x14\n",), "rm -rf DIR"),
        (("safe\x03", "rm -rf DIR\n"), "rm -rf DIR"),
        (("rm -rf \x16\x7fDIR\n",), "rm -rf \x7fDIR"),
        (("\x1b[200~rm -rf DIR\x1b[201~\r",), "rm -rf DIR"),
    ],
)
def test_line_editing_is_reconstructed(writes: tuple[str, ...], expected: str) -> None:
    assert lines(*writes) == [expected]


@pytest.mark.parametrize(
    "writes",
    [
        ("rm -rf \\\n", "DIR\n"),
        ("echo 'a\n", "'; rm -rf DIR\n"),
        ("ls |\n", "xargs rm -rf\n"),
        ("if true; then\n", "rm -rf DIR\n", "fi\n"),
        ("bash <<EOF\n", "rm -rf DIR\n", "EOF\n"),
        ("for f in a; do\n", "rm -rf $f\n", "done\n"),
    ],
)
def test_a_command_split_across_lines_is_one_command(writes: tuple[str, ...]) -> None:
    buf = PtyLineBuffer()
    submitted = [line for w in writes for line in buf.feed(w)]
    assert [line.complete for line in submitted] == [False] * (len(writes) - 1) + [True]
    # Every Enter hands over the whole command typed so far.
    assert submitted[-1].text == "".join(writes).rstrip("\n")
    assert buf.pending == ""


@pytest.mark.parametrize(
    ("writes", "why"),
    [
        (("r\t -rf DIR\n",), "tab"),
        (("\x1b[A\n",), "history"),
        (("\x12rm\n",), "search"),
        (("sudo !!\n",), "history expansion"),
        (("\x1b.\n",), "Alt"),
    ],
)
def test_unmodelled_editing_is_marked_opaque(writes: tuple[str, ...], why: str) -> None:
    buf = PtyLineBuffer()
    out = [line for w in writes for line in buf.feed(w)]
    assert out and out[-1].opaque is not None, why


def test_peek_does_not_change_state() -> None:
    buf = PtyLineBuffer()
    buf.feed("r")
    assert [line.text for line in buf.peek("m -rf DIR\n")] == ["rm -rf DIR"]
    assert buf.pending == "r"
    assert [line.text for line in buf.peek("m -rf DIR\n")] == ["rm -rf DIR"]


def test_overlong_input_is_handed_over() -> None:
    buf = PtyLineBuffer(max_pending=100)
    out = buf.feed("x" * 150)
    assert out and out[0].complete and len(out[0].text) == 101
    assert len(buf.pending) == 49


def guard() -> ApprovalGuard:
    return ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(None))


def test_guard_checks_pty_lines_not_writes() -> None:
    g = guard()
    buf = PtyLineBuffer()
    assert g.check_pty_write(buf, "r", session_id="s", backend="local").allowed
    decision = g.check_pty_write(buf, "m -rf src\n", session_id="s", backend="local")
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "recursive_delete"
    # The refused write was not applied: the terminal still holds "r".
    assert buf.pending == "r"
    assert g.check_pty_write(buf, "\x15ls\n", session_id="s", backend="local").allowed
    assert buf.pending == ""


def test_guard_blocks_hardline_typed_in_pieces() -> None:
    g = guard()
    buf = PtyLineBuffer()
    for piece in ("rm", " -rf", " /"):
        assert g.check_pty_write(buf, piece, session_id="s", backend="local").allowed
    decision = g.check_pty_write(buf, "\r", session_id="s", backend="local")
    assert decision.outcome == "blocked"


def test_guard_asks_for_unmodelled_editing_and_honours_a_once_approval() -> None:
    g = guard()
    buf = PtyLineBuffer()
    decision = g.check_pty_write(buf, "r\t -rf src\n", session_id="s", backend="local")
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "pty_input_unmodelled"
    assert decision.approval_id is not None
    g.approve(decision.approval_id, "once", session_id="s")
    assert g.check_pty_write(buf, "r\t -rf src\n", session_id="s", backend="local").allowed


def test_guard_refuses_overlong_pty_input() -> None:
    g = guard()
    with pytest.raises(CommandTooLong):
        g.check_pty_write(PtyLineBuffer(), "x" * 70_000, session_id="s", backend="local")
