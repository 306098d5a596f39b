"""Structural approval bypasses, through a real worker: what the guard judges must be
what runs (the directory a command runs in, input typed into a pty's program)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import wait_until
from worker.client import SandboxClient


@pytest.fixture
def client(sbx_home: Path, start_worker: Any) -> Any:
    start_worker(None)
    c = SandboxClient(session_id="bypass", settings=settings_for(sbx_home, None))
    yield c
    c.close()


def call(client: SandboxClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


def test_a_command_is_judged_in_the_directory_it_runs_in(client: SandboxClient) -> None:
    # `rm -rf *` in / is a recursive delete of /: hardline, whether the directory is the
    # call's workdir or the session's (set by an earlier cd). Nothing here may run.
    for workdir in ("/", "/usr/..", "/etc"):
        refused = call(client, "terminal", {"command": "rm -rf *", "workdir": workdir})
        assert refused["status"] == "blocked", (workdir, refused)
    assert call(client, "terminal", {"command": "cd /"})["cwd"] == "/"
    assert call(client, "terminal", {"command": "rm -rf *"})["status"] == "blocked"
    assert call(client, "terminal", {"command": "rm -rf *", "workdir": "usr"})["status"] == (
        "blocked"
    )


def test_a_once_grant_is_for_the_directory_it_was_asked_in(
    client: SandboxClient, tmp_path: Path
) -> None:
    approved, other = tmp_path / "approved", tmp_path / "other"
    for d in (approved, other):
        (d / "sub").mkdir(parents=True)
    ask = {"command": "rm -rf *", "workdir": str(approved)}
    refused = call(client, "terminal", ask)
    assert refused["status"] == "approval_required"
    # Asked elsewhere, the same text is another approval: a person approves one directory.
    elsewhere = call(client, "terminal", {"command": "rm -rf *", "workdir": str(other)})
    assert elsewhere["status"] == "approval_required"
    assert elsewhere["approval_id"] != refused["approval_id"]
    assert client.approve(refused["approval_id"], "once").status == "approved"
    # The grant is not spent in another directory...
    again = call(client, "terminal", {"command": "rm -rf *", "workdir": str(other)})
    assert again["status"] == "approval_required"
    assert (other / "sub").exists()
    # ...nor by the same text after a cd elsewhere...
    assert call(client, "terminal", {"command": f"cd {other}"})["exit_code"] == 0
    assert call(client, "terminal", {"command": "rm -rf *"})["status"] == "approval_required"
    assert (other / "sub").exists()
    # ...and runs where it was approved.
    assert call(client, "terminal", ask)["exit_code"] == 0
    assert not (approved / "sub").exists() and (other / "sub").exists()


def _type(client: SandboxClient, process_id: str, data: str) -> dict[str, Any]:
    return call(client, "process", {"action": "write", "process_id": process_id, "data": data})


def _log(client: SandboxClient, process_id: str) -> str:
    text: str = call(client, "process", {"action": "log", "process_id": process_id})["text"]
    return text


def _settled(client: SandboxClient, process_id: str, word: str) -> None:
    """Type ``echo`` of ``word`` and wait for its output: what was typed before has run."""
    assert _type(client, process_id, f"echo {word}-$((6*7))\n")["status"] == "running"
    wait_until(lambda: f"{word}-42" in _log(client, process_id), 30, f"{word} echoed")


def _bash_on_pty(client: SandboxClient, workdir: Path) -> str:
    """A background interactive bash on a pty, ready for typing: its process id."""
    started = call(client, "terminal", {"command": "exec bash --norc --noprofile -i",
                                        "workdir": str(workdir), "background": True,
                                        "pty": True})  # fmt: skip
    pid: str = started["process_id"]
    try:
        _settled(client, pid, "ready")
    except BaseException:
        client.kill(pid)
        raise
    return pid


def test_input_to_a_shell_without_a_line_editor_is_judged_as_it_receives_it(
    client: SandboxClient, tmp_path: Path
) -> None:
    # dash (sh) on a pty reads lines in the kernel's canonical mode: Ctrl-A is a
    # character there, so `rm -rf victim \x01#` removes victim. A readline model alone
    # reads the line as the comment `#rm -rf victim `.
    (tmp_path / "victim" / "sub").mkdir(parents=True)
    started = call(client, "terminal", {"command": "exec dash", "workdir": str(tmp_path),
                                        "background": True, "pty": True})  # fmt: skip
    pid = started["process_id"]
    try:
        refused = _type(client, pid, "rm -rf victim \x01#\n")
        assert refused["status"] == "approval_required", refused
        _settled(client, pid, "after")
        assert (tmp_path / "victim" / "sub").exists()
    finally:
        client.kill(pid)  # a background shell outlives the worker: end it with the test


def test_a_pty_shell_whose_keys_were_rebound_is_not_trusted(
    client: SandboxClient, tmp_path: Path
) -> None:
    # A readline macro runs a command on one key: after `bind`, typed keys mean what the
    # binding says, which the line model cannot know.
    (tmp_path / "victim" / "sub").mkdir(parents=True)
    pid = _bash_on_pty(client, tmp_path)
    try:
        bind = 'bind \'"\\C-a": "rm -rf victim\\n"\'\n'
        refused = _type(client, pid, bind)
        assert refused["status"] == "approval_required", refused
        assert "line editor" in refused["description"]
        assert client.approve(refused["approval_id"], "once").status == "approved"
        assert _type(client, pid, bind)["status"] == "running"  # approved: typed
        # From now on every write asks, whatever it looks like: one key may run a command
        # (refused, nothing was typed).
        for keys in ("\x01", " ", "true\n"):
            assert _type(client, pid, keys)["status"] == "approval_required", repr(keys)
        assert (tmp_path / "victim" / "sub").exists()
    finally:
        client.kill(pid)


def test_a_delete_typed_after_a_cd_line_is_judged_where_the_shell_went(
    client: SandboxClient, tmp_path: Path
) -> None:
    # `cd /` and `rm -rf *` typed as two lines into a pty shell: the second is a delete
    # of / (hardline), not an `rm -rf *` somewhere that a person might approve.
    (tmp_path / "keep").mkdir()
    pid = _bash_on_pty(client, tmp_path)
    try:
        assert _type(client, pid, "cd /\n")["status"] == "running"
        refused = _type(client, pid, "rm -rf *\n")
        assert refused["status"] == "blocked", refused
        assert "hardline" in refused["error"], refused
        # Lines that move the shell where they cannot be followed leave it unknown: the
        # same delete then asks, as any `rm -rf *` of an unknown directory does.
        assert _type(client, pid, f"cd {tmp_path}; cd /\n")["status"] == "running"
        assert _type(client, pid, "rm -rf *\n")["status"] == "approval_required"
        _settled(client, pid, "after")
        assert (tmp_path / "keep").exists()
    finally:
        client.kill(pid)


@pytest.mark.parametrize("how", ["workdir", "session"])
def test_a_delete_typed_into_a_pty_is_judged_where_the_pty_started(
    client: SandboxClient, tmp_path: Path, how: str
) -> None:
    # A pty bash started in / (its workdir, or the session's directory): `rm -rf *` typed
    # as its first line is a delete of / (hardline), not one somewhere that may be asked.
    if how == "session":
        assert call(client, "terminal", {"command": "cd /"})["exit_code"] == 0
    where = {"workdir": "/"} if how == "workdir" else {}
    started = call(client, "terminal", {"command": "exec bash --norc --noprofile -i",
                                        "background": True, "pty": True, **where})  # fmt: skip
    pid: str = started["process_id"]
    try:
        _settled(client, pid, "ready")
        refused = _type(client, pid, "rm -rf *\n")
        assert refused["status"] == "blocked", refused
        assert "hardline" in refused["error"], refused
        _settled(client, pid, "after")
    finally:
        client.kill(pid)
