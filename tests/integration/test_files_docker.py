"""Files through a real worker into a docker sandbox: paths are the container's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from worker.client import FileError, SandboxClient

IMAGE = "sbx-test-busybox:latest"


@pytest.fixture
def docker_client(
    docker_client_ready: Any, sbx_home: Path, start_worker: Any
) -> Iterator[SandboxClient]:
    start_worker(None, SBX_DOCKER_IMAGE=IMAGE, SBX_ALLOWED_BACKENDS="local,docker")
    client = SandboxClient(
        session_id="dfiles", backend="docker", settings=settings_for(sbx_home, None)
    )
    yield client
    client.close()
    api = docker_client_ready.api  # type: ignore[attr-defined]
    for c in api.containers(all=True, filters={"label": ["sbx=1", "sbx.session=dfiles"]}):
        api.remove_container(c["Id"], force=True)


def test_files_live_in_the_container(docker_client: SandboxClient, sbx_home: Path) -> None:
    data = bytes(range(256)) * 5000  # binary, over a megabyte: more than one piece
    docker_client.exec("cd /tmp")
    info = docker_client.upload("blob.bin", data)
    assert (info.path, info.size) == ("/tmp/blob.bin", len(data))
    assert docker_client.exec("wc -c < /tmp/blob.bin").output.strip() == str(len(data))
    assert docker_client.download("/tmp/blob.bin") == data
    # The container's own files, not the worker machine's.
    hostname = docker_client.exec("cat /etc/hostname").output.encode()
    assert docker_client.download("/etc/hostname") == hostname
    with pytest.raises(FileError) as absent:
        docker_client.download(str(sbx_home / "secret.key"))
    assert absent.value.status == "not_found"


def test_model_file_tools_in_the_container(docker_client: SandboxClient) -> None:
    r = json.loads(docker_client.tool_call(
        "write_file", {"path": "/tmp/conf.txt", "content": "DB_PASSWORD=hunter2hunter2\nok\n"}
    ))  # fmt: skip
    assert r == {"path": "/tmp/conf.txt", "bytes_written": 30}
    r = json.loads(docker_client.tool_call("read_file", {"path": "/tmp/conf.txt"}))
    assert r["content"] == "DB_PASSWORD=[REDACTED]\nok\n"
    assert docker_client.download("/tmp/conf.txt") == b"DB_PASSWORD=hunter2hunter2\nok\n"
