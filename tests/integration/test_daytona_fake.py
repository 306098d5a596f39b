"""The fake Daytona speaks the protocol the SDK expects: the SDK used directly against it.

These pin down the parts of the fake the backend does not use today (server-side
sessions, the execute timeout) as well as the ones it does, so an SDK upgrade
that changes the wire shows up here first.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("daytona")

import daytona

from tests.fakes.daytona import FakeDaytona
from tests.helpers import wait_until


@pytest.fixture
def sandbox(daytona_fake: FakeDaytona) -> Iterator[Any]:
    client = daytona.Daytona(
        daytona.DaytonaConfig(api_key=daytona_fake.token, api_url=daytona_fake.api_url, target="us")
    )
    created = client.create(
        daytona.CreateSandboxFromSnapshotParams(
            name=f"fake-{secrets.token_hex(4)}", labels={"fake-test": "1"}, network_block_all=True
        )
    )
    yield created
    created.delete()


def test_sessions_keep_state_and_run_commands_async(sandbox: Any) -> None:
    process = sandbox.process
    process.create_session("s1")
    first = process.execute_session_command(
        "s1", daytona.SessionExecuteRequest(command="cd /tmp && export A=1 && echo ok")
    )
    assert (first.exit_code, first.stdout) == (0, "ok\n")
    later = process.execute_session_command(
        "s1", daytona.SessionExecuteRequest(command='pwd; echo "$A"; (exit 3)', run_async=True)
    )

    def finished() -> bool:
        return process.get_session_command("s1", later.cmd_id).exit_code is not None

    wait_until(finished, 30, "the async session command to finish")
    assert process.get_session_command("s1", later.cmd_id).exit_code == 3
    assert process.get_session_command_logs("s1", later.cmd_id).stdout == "/tmp\n1\n"
    process.delete_session("s1")


def test_execute_reports_status_output_and_timeout(sandbox: Any) -> None:
    response = sandbox.process.exec("echo out; echo err >&2; exit 5")
    assert (response.exit_code, response.result) == (5, "out\nerr\n")
    started = time.monotonic()
    with pytest.raises(daytona.DaytonaError) as caught:
        sandbox.process.exec("sleep 600", timeout=1)
    assert caught.value.status_code == 408
    assert time.monotonic() - started < 60


def test_files_and_their_errors(sandbox: Any) -> None:
    sandbox.fs.upload_file(b"\x00\xffdata", "/tmp/deep/dir/f.bin")
    assert sandbox.fs.download_file("/tmp/deep/dir/f.bin") == b"\x00\xffdata"
    with pytest.raises(daytona.DaytonaFileNotFoundError):
        sandbox.fs.download_file("/tmp/missing")


def test_pty_session_is_a_terminal_and_can_be_killed(sandbox: Any) -> None:
    handle = sandbox.process.create_pty_session("p1")
    handle.send_input(b"[ -t 0 ] && [ -t 1 ] && echo terminal; echo done-$((6*7))\n")
    seen = b""
    for chunk in handle:
        seen += chunk
        if b"done-42" in seen:
            break
    assert b"terminal\r\n" in seen
    sandbox.process.kill_pty_session("p1")
    assert handle.wait(timeout=30).exit_code == 137


def test_a_stopped_sandbox_keeps_its_files_and_loses_its_processes(
    daytona_fake: FakeDaytona, sandbox: Any
) -> None:
    sandbox.process.exec("echo kept > ~/f; (setsid sleep 777 >/dev/null 2>&1 &)")
    sandbox.stop()
    sandbox.start()
    assert sandbox.process.exec("cat ~/f").result == "kept\n"
    assert sandbox.process.exec("pgrep -f 'sleep 777' || echo gone").result == "gone\n"
    listed = daytona.Daytona(
        daytona.DaytonaConfig(api_key=daytona_fake.token, api_url=daytona_fake.api_url, target="us")
    ).list(daytona.ListSandboxesQuery(labels={"fake-test": "1"}))
    assert sandbox.id in [s.id for s in listed]
