"""A pty shell's directory, as the lines typed into it tell, adds hard-line blocks only."""

from __future__ import annotations

import pytest

from registry.approval import ApprovalGuard, PtyLineBuffer
from registry.approval.pty_cwd import PtyCwd, start_dir


def typed(*writes: str, start: str | None = None) -> str | None:
    """Where the shell is after ``writes``, as the buffer that fed them tells."""
    buf = PtyLineBuffer(cwd=start)
    for w in writes:
        buf.feed(w)
    return buf.cwd.current


@pytest.mark.parametrize(
    ("writes", "start", "where"),
    [
        (("cd /\n",), None, "/"),
        (("cd /usr/lib\n", "cd ..\n", "ls\n"), None, "/usr"),
        (("cd -- /srv\n",), None, "/srv"),
        (("cd /srv\n", "cd ../..\n"), None, "/"),
        (("cd sub\n",), "/home/u", "/home/u/sub"),
        (("c", "d /e", "tc\n"), None, "/etc"),  # a line typed in pieces
        (("cd /tmp", "\x7f\x7f\x7f\n"), None, "/"),  # edited before Enter
        (("cd sub\n",), None, None),  # relative to an unknown place
        (("cd /\n", "cd $HOME\n"), None, None),  # an expansion
        (("cd /\n", 'cd "/tmp"\n'), None, None),  # quoting
        (("cd /\n", "cd -\n"), None, None),
        (("cd /\n", "cd\n"), None, None),
        (("cd /\n", "pushd /tmp\n"), None, None),
        (("cd /\n", "ls; cd /tmp\n"), None, None),
        (("cd /\n", ". ./env.sh\n"), None, None),
        (("cd /\n", "up() { cd /tmp; }\n"), None, None),
        (("cd /\n", "eval x\n"), None, None),
        (("cd /\n", "cd /tm\t\n"), None, None),  # tab completion: not modelled
        (("cd /\n", "cd /tmp \\\n"), None, "/"),  # not complete yet: not run
        (("cd /\n", "ls -la\n", "echo done\n"), None, "/"),
        (("cd /\n", "echo cd\n"), None, None),  # a mover's name anywhere: not followed
    ],
)
def test_the_directory_follows_plain_cd_lines_only(
    writes: tuple[str, ...], start: str | None, where: str | None
) -> None:
    assert typed(*writes, start=start) == where


def test_along_tells_each_line_its_directory_and_changes_nothing() -> None:
    buf = PtyLineBuffer()
    lines = buf.peek_both("cd /srv\nls\ncd app\nrm -rf *\n")
    assert PtyCwd().along(lines) == [None, "/srv", "/srv", "/srv/app"]
    assert buf.cwd.current is None


def guard_decides(*writes: str) -> list[str]:
    guard, buf = ApprovalGuard(), PtyLineBuffer()
    return [guard.check_pty_write(buf, w, session_id="s", backend="local").outcome
            for w in writes]  # fmt: skip


def test_a_delete_in_the_directory_a_cd_line_moved_to_is_blocked() -> None:
    assert guard_decides("cd /\n", "rm -rf *\n") == ["allow", "blocked"]
    assert guard_decides("cd /\nrm -rf *\n") == ["blocked"]
    assert guard_decides("cd /usr\n", "cd ..\n", "rm -rf *\n") == ["allow", "allow", "blocked"]


def test_the_hint_never_lets_through_what_the_check_without_it_stops() -> None:
    # Somewhere harmless by the hint, the delete still asks as it does without one...
    assert guard_decides("cd /tmp/build\n", "rm -rf *\n") == ["allow", "approval_required"]
    # ...and where the lines cannot tell, it is judged as before: it asks.
    assert guard_decides("cd /\n", "cd $(echo /tmp)\n", "rm -rf *\n")[-1] == "approval_required"


def test_a_refused_line_does_not_move_the_hint() -> None:
    guard, buf = ApprovalGuard(), PtyLineBuffer()
    assert guard.check_pty_write(buf, "cd /\n", session_id="s", backend="local").allowed
    refused = guard.check_pty_write(buf, "rm -rf * ; cd /tmp\n", session_id="s", backend="local")
    assert refused.outcome == "blocked"
    assert buf.cwd.current == "/"


@pytest.mark.parametrize(
    ("session_cwd", "workdir", "where"),
    [
        ("/srv/app", None, "/srv/app"),
        ("/srv/app", "build", "/srv/app/build"),
        ("/srv/app", "../..", "/"),
        ("/srv/app", "/etc/", "/etc"),
        (None, "/etc", "/etc"),
        (None, "build", None),  # relative to an unknown place
        (None, None, None),
    ],
)
def test_a_pty_starts_where_its_workdir_or_its_session_is(
    session_cwd: str | None, workdir: str | None, where: str | None
) -> None:
    assert start_dir(session_cwd, workdir) == where
