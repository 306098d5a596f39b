"""The on-disk cap of background processes' output in docker sandboxes: the sandbox's
own ``fallocate`` punches the holes, or the cap is reported as not enforced."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from environments.base import OUTPUT_ALIGN, Environment, discard_boundary
from process_registry.table import ProcessTable

OWNER = "s-owner"
CAP = 1 << 20
BOUND = CAP + 2 * OUTPUT_ALIGN
"""Disk use allowed after a sweep: the cap, plus block rounding and file-system metadata."""

REMOTE_LINES = 1_000_000
REMOTE_SUFFIX = " héllo ✓"
REMOTE_STREAM = b"".join(f"{i}{REMOTE_SUFFIX}\n".encode() for i in range(1, REMOTE_LINES + 1))
REMOTE_COMMAND = f"seq 1 {REMOTE_LINES} | sed 's/$/{REMOTE_SUFFIX}/'"


def remote_registry(home: Path, env: Environment, spool: Path) -> ProcessTable:
    return ProcessTable(home, lambda rec: env, spool_dir=spool, output_cap=CAP)


def remote_disk_bytes(env: Environment, path: str) -> int:
    result = env.exec(f"stat -c %b {path}")
    assert result.exit_code == 0, result.output
    return int(result.output.strip()) * 512


def with_util_linux_fallocate(env: Environment, client: Any) -> None:
    """Give a busybox container util-linux's fallocate (the bash image carries glibc)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tar.gettarinfo("/usr/bin/fallocate", arcname="usr/bin/fallocate")
        info.uid = info.gid = 0
        with open("/usr/bin/fallocate", "rb") as f:
            tar.addfile(info, f)
    env.exec("true")  # creates the container
    container = client.containers.get(env.container_id)  # type: ignore[attr-defined]
    assert container.put_archive("/", buf.getvalue())


@pytest.fixture
def docker_writable_factory(docker_client_ready: Any) -> Iterator[Any]:
    """Containers of the bash image whose root file system takes a util-linux fallocate."""
    from tests.fixtures_backends import DOCKER_IMAGES, make_docker_factory

    tracker = make_docker_factory(docker_client_ready, DOCKER_IMAGES["bash"], read_only=False)
    yield tracker
    tracker.close_all()


def test_docker_with_util_linux_fallocate_is_bounded(
    home: Path, spool: Path, docker_writable_factory: Any, docker_client_ready: Any
) -> None:
    env = docker_writable_factory("cap-docker")
    with_util_linux_fallocate(env, docker_client_ready)
    reg = remote_registry(home, env, spool)
    try:
        rec = reg.start(env, REMOTE_COMMAND, owner_session_id=OWNER)
        info = reg.wait(rec.process_id, OWNER, timeout=120)
        total = len(REMOTE_STREAM)
        gone = discard_boundary(total, CAP)
        assert (info.status, info.output_bytes, info.output_cap_enforced) == ("exited", total, True)
        assert info.output_discarded == gone > 0
        assert remote_disk_bytes(env, rec.output_path) <= BOUND
        chunk = reg.log(rec.process_id, OWNER, 0, 65536)
        assert chunk.discarded_before == gone and "\x00" not in chunk.text
        assert REMOTE_STREAM[chunk.offset - 1 : chunk.offset] == b"\n"
        assert chunk.text.encode() == REMOTE_STREAM[chunk.offset : chunk.next_offset]
        receipt = reg.receipts.read(rec.process_id, OWNER)
        assert receipt.output.startswith(f"[... {chunk.offset} earlier bytes discarded")
        assert "\x00" not in receipt.output and receipt.output_bytes == total
        assert receipt.output.endswith(f"{REMOTE_LINES}{REMOTE_SUFFIX}\n")
    finally:
        reg.close()


def test_docker_busybox_says_the_cap_is_not_enforced(
    home: Path, spool: Path, docker_factory: Any
) -> None:
    """busybox fallocate cannot punch holes: the file keeps everything, and says so."""
    env = docker_factory("cap-busybox")
    reg = remote_registry(home, env, spool)
    try:
        rec = reg.start(env, REMOTE_COMMAND, owner_session_id=OWNER)
        info = reg.wait(rec.process_id, OWNER, timeout=120)
        assert (info.status, info.output_bytes) == ("exited", len(REMOTE_STREAM))
        assert (info.output_cap, info.output_cap_enforced, info.output_discarded) == (
            CAP, False, 0)  # fmt: skip
        assert remote_disk_bytes(env, rec.output_path) >= len(REMOTE_STREAM) - OUTPUT_ALIGN
        chunk = reg.log(rec.process_id, OWNER, 0, 100)
        assert (chunk.offset, chunk.discarded_before) == (0, 0)
        assert chunk.text.encode() == REMOTE_STREAM[: chunk.next_offset]
        receipt = reg.receipts.read(rec.process_id, OWNER)
        assert receipt.output.startswith("1 héllo ✓\n")
    finally:
        reg.close()
