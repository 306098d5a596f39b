"""A foreground call streamed through a real worker: output while the command runs,
redacted, the result last; leaving early cancels; ``sbx exec`` prints live.

Liveness is proven without timing: each command waits for a file that the test
creates only after it has seen the command's first output, so that output can
only have arrived while the command was still running.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO
from worker.client import AsyncSandboxClient, SandboxClient, TerminalResult

TOKEN_HEAD, TOKEN_TAIL = "ghp_a1B2c3D4e5F6g7H8", "i9J0k1L2m3N4o5P6q7R8"


def waits_for(release: Path) -> str:
    return f"while [ ! -e {release} ]; do sleep 0.02; done"


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """Where the test and the local sandbox share files (bound into its jail)."""
    return tmp_path


@pytest.fixture
def client(sbx_home: Path, start_worker: Any) -> Iterator[SandboxClient]:
    start_worker(None)
    with SandboxClient(session_id="live", settings=settings_for(sbx_home, None)) as c:
        yield c


@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_output_arrives_while_the_command_runs_and_the_result_comes_last(
    broker: str, request: pytest.FixtureRequest, sbx_home: Path, start_worker: Any, tmp: Path
) -> None:
    url = request.getfixturevalue("external_redis_url") if broker == "redis" else None
    if url:
        import redis

        redis.Redis.from_url(url).flushdb()
    start_worker(url)
    release = tmp / "release"
    command = f"echo first; {waits_for(release)}; echo second; exit 3"
    items: list[str | TerminalResult] = []
    with SandboxClient(session_id="live", settings=settings_for(sbx_home, url)) as c:
        for item in c.exec_stream(command, timeout=120):
            items.append(item)
            if item == "first\n":
                release.touch()
    result = items[-1]
    assert isinstance(result, TerminalResult)
    assert (result.exit_code, result.output) == (3, "first\nsecond\n")
    assert all(isinstance(i, str) for i in items[:-1])
    assert "".join(str(i) for i in items[:-1]) == "first\nsecond\n"


def test_a_secret_split_across_reads_never_shows(client: SandboxClient, tmp: Path) -> None:
    release = tmp / "release"
    command = (f"echo start; printf 'GITHUB_TOKEN={TOKEN_HEAD}'; {waits_for(release)}; "
               f"printf '{TOKEN_TAIL}\\n'; echo end")  # fmt: skip
    pieces: list[str] = []
    result = None
    for item in client.exec_stream(command, timeout=120):
        if isinstance(item, TerminalResult):
            result = item
            continue
        pieces.append(item)
        if item.startswith("start\n"):
            release.touch()
    assert result is not None and result.exit_code == 0
    assert "".join(pieces) == "start\nGITHUB_TOKEN=ghp_...[REDACTED]\nend\n" == result.output
    assert not any(part in p for p in pieces for part in (TOKEN_HEAD[4:], TOKEN_TAIL))


def test_leaving_the_loop_cancels_the_command(client: SandboxClient) -> None:
    marker = "98765.25"  # a sleep only this test runs
    for item in client.exec_stream(f"echo first; sleep {marker}", timeout=600):
        assert item == "first\n"
        break
    # The session's next command runs once the abandoned one is gone: it was killed.
    assert client.exec("echo next").output == "next\n"
    assert not [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


def test_a_call_without_output_streams_only_its_result(client: SandboxClient) -> None:
    items = list(client.exec_stream("true"))
    assert len(items) == 1 and isinstance(items[0], TerminalResult)
    refused = list(client.exec_stream("rm -rf /"))
    assert len(refused) == 1 and isinstance(refused[0], TerminalResult)
    assert refused[0].status == "blocked"


async def test_async_iterator_streams_and_cancels(
    sbx_home: Path, start_worker: Any, tmp: Path
) -> None:
    start_worker(None)
    release = tmp / "release"
    async with AsyncSandboxClient(session_id="alive", settings=settings_for(sbx_home, None)) as c:
        seen: list[str | TerminalResult] = []
        async for item in c.exec_stream(f"echo a; {waits_for(release)}; echo b", timeout=120):
            seen.append(item)
            if item == "a\n":
                release.touch()
        assert seen[:-1] == ["a\n", "b\n"]
        assert isinstance(seen[-1], TerminalResult) and seen[-1].exit_code == 0

        marker = "98766.25"

        async def consume() -> None:
            async for _ in c.exec_stream(f"echo go; sleep {marker}", timeout=600):
                started.set()

        started = asyncio.Event()
        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await c.exec("echo next")).output == "next\n"
        assert not [p for p in psutil.process_iter(["cmdline"])
                    if marker in (p.info["cmdline"] or [])]  # fmt: skip


def test_sbx_exec_prints_output_live(sbx_home: Path, start_worker: Any, tmp: Path) -> None:
    start_worker(None)
    release = tmp / "release"
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.cli.main", "exec", "--",
         f"echo first; {waits_for(release)}; echo second; exit 5"],
        env=worker_env(sbx_home, None), cwd=str(REPO),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"first\n"  # printed before the command could end
        release.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (out, proc.returncode) == (b"second\n", 5), err

