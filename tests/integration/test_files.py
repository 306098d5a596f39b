"""Files through a real worker: upload/download (sync and async) and the model's
read_file/write_file tools -- chunked through the ledger, capped, owner-only, confined."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from worker.client import AsyncSandboxClient, FileError, SandboxClient
from worker.client.files import CHUNK


@pytest.fixture
def workdir(scratch_dir: Path) -> Path:
    """The local sandbox's starting directory (relative paths land here)."""
    return scratch_dir


@pytest.fixture
def client(sbx_home: Path, workdir: Path, start_worker: Any) -> Iterator[SandboxClient]:
    start_worker(None, SBX_LOCAL_CWD=str(workdir))
    with SandboxClient(session_id="files", settings=settings_for(sbx_home, None)) as c:
        yield c


def call(client: SandboxClient, tool: str, args: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(client.tool_call(tool, args))
    return result


@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_a_large_binary_file_goes_up_and_comes_back_byte_exact(
    broker: str, request: pytest.FixtureRequest, sbx_home: Path, workdir: Path,
    start_worker: Any,
) -> None:  # fmt: skip
    url = request.getfixturevalue("external_redis_url") if broker == "redis" else None
    if url:
        import redis

        redis.Redis.from_url(url).flushdb()
    start_worker(url, SBX_LOCAL_CWD=str(workdir))
    data = os.urandom(3 * CHUNK + 12345) + b"\x00\xff" * 10
    with SandboxClient(session_id="big", settings=settings_for(sbx_home, url)) as c:
        info = c.upload("blob.bin", data)
        assert (info.path, info.size) == (str(workdir / "blob.bin"), len(data))
        assert info.sha256 == hashlib.sha256(data).hexdigest()
        assert (workdir / "blob.bin").read_bytes() == data  # the sandbox's file system
        assert c.download(info.path) == data
        # Nothing staged stays behind in the ledger; the call's stream is drained.
        assert c.ledger.client.keys("sbx:call:*:upload") == []
        assert c.ledger.client.keys("sbx:call:*:stream") == []
        # An empty file is a file too.
        assert c.upload("empty", b"").size == 0
        assert c.download("empty") == b""


def test_relative_paths_follow_the_session_and_missing_ones_are_not_found(
    client: SandboxClient, workdir: Path
) -> None:
    (workdir / "sub").mkdir()
    client.exec("cd sub")
    assert client.upload("here.txt", b"x").path == str(workdir / "sub" / "here.txt")
    assert client.download("../sub/here.txt") == b"x"
    with pytest.raises(FileError) as missing:
        client.download("nope.txt")
    assert missing.value.status == "not_found"
    with pytest.raises(FileError) as no_dir:
        client.upload("no/such/dir/f", b"x")
    assert no_dir.value.status == "not_found"
    with pytest.raises(FileError) as is_dir:
        client.download(str(workdir))
    assert is_dir.value.status == "invalid"


def test_files_over_the_operator_cap_are_refused_both_ways(
    sbx_home: Path, workdir: Path, start_worker: Any
) -> None:
    start_worker(None, SBX_LOCAL_CWD=str(workdir), SBX_MAX_FILE_BYTES="4096")
    # This client's own cap is larger: the worker's is the one that refuses.
    with SandboxClient(session_id="cap", settings=settings_for(sbx_home, None)) as c:
        with pytest.raises(FileError) as up:
            c.upload("big.bin", b"x" * 5000)
        assert up.value.status == "invalid"
        assert "SBX_MAX_FILE_BYTES" in str(up.value)
        assert not (workdir / "big.bin").exists()
        (workdir / "big.txt").write_text("y" * 5000)
        with pytest.raises(FileError) as down:
            c.download("big.txt")
        assert down.value.status == "invalid"
        assert call(c, "read_file", {"path": "big.txt"})["status"] == "invalid"
        assert c.upload("small.bin", b"z" * 4096).size == 4096  # at the cap: fine
    # A client refuses what its own settings cap before sending anything.
    small = settings_for(sbx_home, None, max_file_bytes=1024)
    with SandboxClient(session_id="cap", settings=small) as c:
        with pytest.raises(FileError) as early:
            c.upload("x.bin", b"x" * 2048)
        assert early.value.status == "invalid"


def test_only_the_session_with_its_token_reaches_its_files(
    client: SandboxClient, sbx_home: Path, workdir: Path
) -> None:
    client.upload("mine.txt", b"private")
    impostor = SandboxClient(
        session_id="files", session_token="sbx1.not-a-valid-token-at-all",
        settings=settings_for(sbx_home, None),
    )  # fmt: skip
    with impostor:
        for attempt in (lambda: impostor.download("mine.txt"),
                        lambda: impostor.upload("mine.txt", b"overwritten")):  # fmt: skip
            with pytest.raises(FileError) as denied:
                attempt()
            assert denied.value.status == "denied"
            assert "private" not in str(denied.value.result)
    assert (workdir / "mine.txt").read_bytes() == b"private"


def test_the_workers_own_state_is_out_of_reach(
    client: SandboxClient, sbx_home: Path, workdir: Path
) -> None:
    secret = sbx_home / "secret.key"
    (workdir / "link").symlink_to(secret)
    attempts: list[Callable[[], object]] = [
        lambda: client.download(str(secret)),
        lambda: client.download("link"),
        lambda: client.upload(str(sbx_home / "new-file"), b"x"),
    ]
    for attempt in attempts:
        with pytest.raises(FileError) as denied:
            attempt()
        assert denied.value.status == "denied"
        assert secret.read_bytes().decode(errors="replace") not in str(denied.value.result)
    for tool, args in (("read_file", {"path": str(secret)}), ("read_file", {"path": "link"}),
                       ("write_file", {"path": str(sbx_home / "x"), "content": "x"})):  # fmt: skip
        assert call(client, tool, args)["status"] == "denied"
    assert not (sbx_home / "new-file").exists() and not (sbx_home / "x").exists()


def test_read_file_returns_a_redacted_window_of_text(
    client: SandboxClient, workdir: Path
) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    lines = [f"line {n}" for n in range(1, 11)]
    lines[4] = f"GITHUB_TOKEN={token}"
    (workdir / "notes.txt").write_text("\n".join(lines) + "\n")
    r = call(client, "read_file", {"path": "notes.txt"})
    assert (r["start_line"], r["end_line"], r["total_lines"], r["truncated"]) == (1, 10, 10, False)
    assert token not in r["content"] and "GITHUB_TOKEN=ghp_...[REDACTED]" in r["content"]
    assert r["path"] == str(workdir / "notes.txt")
    r = call(client, "read_file", {"path": "notes.txt", "offset": 3, "limit": 2})
    assert (r["content"], r["start_line"], r["end_line"], r["truncated"]) == (
        "line 3\nline 4\n", 3, 4, True,
    )  # fmt: skip
    (workdir / "blob").write_bytes(b"\x7fELF\x00\x01")
    assert call(client, "read_file", {"path": "blob"})["status"] == "invalid"
    assert call(client, "read_file", {"path": "absent"})["status"] == "not_found"
    bad = call(client, "read_file", {"path": "notes.txt", "offset": 0})
    assert "offset" in bad["error"]


def test_write_file_writes_text_and_asks_before_touching_login_files(
    client: SandboxClient, workdir: Path
) -> None:
    r = call(client, "write_file", {"path": "out/../new.txt", "content": "héllo\n"})
    assert r == {"path": str(workdir / "new.txt"), "bytes_written": 7}
    assert (workdir / "new.txt").read_text() == "héllo\n"
    assert client.exec("cat new.txt").output == "héllo\n"
    refused = call(client, "write_file", {"path": "/etc/passwd", "content": "root::0:0::/:/bin/sh"})
    assert refused["status"] == "approval_required"
    too_big = call(client, "write_file", {"path": "huge.txt", "content": "x" * (1 << 20 | 1)})
    assert too_big["status"] == "invalid" and "upload" in too_big["error"]
    assert not (workdir / "huge.txt").exists()


async def test_async_upload_and_download(sbx_home: Path, workdir: Path, start_worker: Any) -> None:
    start_worker(None, SBX_LOCAL_CWD=str(workdir))
    async with AsyncSandboxClient(session_id="afiles", settings=settings_for(sbx_home, None)) as c:
        info = await c.upload("a.bin", b"\x01\x02" * 1000)
        assert info.size == 2000
        assert await c.download("a.bin") == b"\x01\x02" * 1000
