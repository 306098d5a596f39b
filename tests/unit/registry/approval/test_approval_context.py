"""The directory a command runs in, as the guard judges and grants it."""

from __future__ import annotations

import pytest

from registry.approval import ApprovalGuard
from registry.approval.context import in_directory, run_directory, with_directory


@pytest.mark.parametrize(
    ("session_cwd", "workdir", "expected"),
    [
        (None, None, None),
        ("/w", None, "/w"),
        ("/w", "/", "/"),
        ("/w", "sub/../..", "/"),
        ("/w/p", "..", "/w"),
        (None, "rel", "rel"),
        ("", "/usr/..", "/"),
    ],
)
def test_run_directory_is_where_cd_lands(
    session_cwd: str | None, workdir: str | None, expected: str | None
) -> None:
    assert run_directory(session_cwd, workdir) == expected


def test_only_an_absolute_directory_sets_pwd() -> None:
    assert with_directory({"HOME": "/h"}, "/x") == {"HOME": "/h", "PWD": "/x"}
    assert with_directory({"HOME": "/h"}, "rel") == {"HOME": "/h"}
    assert with_directory(None, None) is None
    assert in_directory("rm -rf *", None) == "rm -rf *"
    assert in_directory("rm -rf *", "/a b") == "cd -- '/a b' && rm -rf *"


def test_guard_judges_and_grants_in_the_directory() -> None:
    guard = ApprovalGuard()
    assert guard.check("rm -rf *", session_id="s", backend="local", cwd="/").outcome == "blocked"
    home = {"HOME": "/home/u"}
    assert guard.check("rm -rf -- *", session_id="s", backend="local", env=home,
                       cwd="/home/u").outcome == "blocked"  # fmt: skip
    asked = guard.check("rm -rf *", session_id="s", backend="local", cwd="/w/a")
    assert asked.outcome == "approval_required" and asked.approval_id
    record = guard.get(asked.approval_id)
    assert record is not None and record.command == "cd -- /w/a && rm -rf *"
    guard.approve(asked.approval_id, "once", session_id="s")
    assert not guard.check("rm -rf *", session_id="s", backend="local", cwd="/w/b").allowed
    assert guard.check("rm -rf *", session_id="s", backend="local", cwd="/w/a").allowed
