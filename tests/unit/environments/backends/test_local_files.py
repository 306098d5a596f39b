"""The local backend's files: a FIFO, socket or device the sandbox plants where the
worker reads or writes a file is refused at once, never waited on.

Each attack plants the special file from inside the real jail (the session's shell),
then drives the worker's side of the file contract at it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.errors import NotRegularFile
from registry.tools.file_access import file_error
from tests.fixtures_backends import require_jail

# Hang guard: before the fix these opens block forever (a FIFO's open waits for
# its other end); pytest-timeout turns that into a failure.
pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def _jail() -> None:
    require_jail()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LocalEnvironment]:
    work = tmp_path / "work"
    work.mkdir()
    e = LocalEnvironment("files", LocalConfig(cwd=str(work), state_dir=str(tmp_path / "jails")))
    yield e
    e.close()


def run(env: LocalEnvironment, command: str) -> None:
    result = env.exec(command, timeout=60)
    assert result.exit_code == 0, result.output


def test_reading_a_fifo_is_refused_not_waited_on(env: LocalEnvironment) -> None:
    run(env, "mkfifo /tmp/f")
    with pytest.raises(NotRegularFile) as caught:
        env.read_file("/tmp/f")
    # What the read_file tool answers: invalid, with the path it was given.
    assert file_error(caught.value, "/tmp/f") == {
        "error": "/tmp/f is not a regular file (a FIFO, socket or device): refused",
        "status": "invalid",
    }
    with pytest.raises(NotRegularFile):
        env.read_output("/tmp/f", 0, 100)


def test_a_fifo_with_a_reader_is_refused_too(env: LocalEnvironment) -> None:
    # The sandbox holds the FIFO open for reading, so a write-open would succeed at once:
    # the check after the open refuses it all the same.
    run(env, "mkfifo /tmp/f")
    run(
        env,
        "(exec 3<>/tmp/f; : > /tmp/held; exec sleep 300) >/dev/null 2>&1 & "
        "while [ ! -e /tmp/held ]; do sleep 0.01; done",
    )
    with pytest.raises(NotRegularFile):
        env.trim_output_head("/tmp/f", 1 << 18)
    with pytest.raises(NotRegularFile):
        env.read_file("/tmp/f")


def test_trimming_a_fifo_without_a_reader_is_refused(env: LocalEnvironment) -> None:
    run(env, "mkfifo /tmp/f")
    with pytest.raises(NotRegularFile):
        env.trim_output_head("/tmp/f", 1 << 18, probe=True)


def test_write_file_past_a_fifo_at_its_temp_name_is_refused(env: LocalEnvironment) -> None:
    # write_file writes "<path>.sbx-tmp-<worker pid>" and renames it: a predictable name.
    run(env, f"mkfifo /tmp/t.sbx-tmp-{os.getpid()}")
    with pytest.raises(NotRegularFile):
        env.write_file("/tmp/t", b"data")


def test_a_socket_is_refused(env: LocalEnvironment) -> None:
    run(env, "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/tmp/s\")'")
    with pytest.raises(NotRegularFile):
        env.read_file("/tmp/s")


def test_regular_files_still_work_and_keep_blocking_descriptors(env: LocalEnvironment) -> None:
    env.write_file("/tmp/r", b"hello")
    assert env.read_file("/tmp/r") == b"hello"
    assert env.read_output("/tmp/r", 1, 3).data == b"ell"
    fd = env.files.open("/tmp/r", os.O_WRONLY | os.O_APPEND)
    try:
        # Such a descriptor becomes a process's stdout: no O_NONBLOCK left on it.
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    finally:
        os.close(fd)
    with pytest.raises(IsADirectoryError):
        env.read_file("/tmp")


def test_without_a_jail_a_fifo_is_refused_too(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    plain = LocalEnvironment("plain", LocalConfig(cwd=str(tmp_path), isolation="none"))
    try:
        with pytest.raises(NotRegularFile):
            plain.read_file(str(fifo))
    finally:
        plain.close()
