"""inspect_ai's own sandbox self-check, run against the ``sbx`` sandbox on local and docker.

The checks are inspect_ai's (``inspect_ai.util._sandbox.self_check``, pulled into this
module's collection as that module asks); each gets a fresh sample -- a new sbx session
made by ``sample_init`` through a real worker, ended by ``sample_cleanup``. The checks
sbx cannot pass by design are marked here, each with its reason, and strictly: one that
starts passing fails the run until its mark is removed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.helpers import require_module
from tests.integration.deployment import Deployment, deployment, remove_containers

require_module("inspect_ai", "pip install 'sbx[inspect]'")

from inspect_ai.util import SandboxEnvironment  # noqa: E402
from inspect_ai.util._sandbox.self_check import *  # noqa: E402, F403 -- the checks

from worker.integrations.inspect_provider import (  # noqa: E402
    SbxSandboxConfig,
    SbxSandboxEnvironment,
)

BUSYBOX = "sbx-test-busybox:latest"

NOT_SBX = {
    "test_exec_as_user": "sbx runs commands as the sandbox's own user; it switches no users",
}
"""Checks that ask for what sbx does not do, on every backend."""

AS_ROOT = {
    name: "the sandbox's user is root here, and root reads and writes whatever a mode says"
    for name in (
        "test_read_file_not_allowed",
        "test_write_text_file_without_permissions",
        "test_write_binary_file_without_permissions",
    )
}
"""Checks that need a user file modes bind: not a root with capabilities (a container's)."""

IMAGE_LACKS = {
    "docker": {"test_cwd_custom": f"{BUSYBOX} has no /usr/bin (its applets are in /bin)"},
}
"""Checks that assume what the backend's test image does not have."""


@pytest.fixture(scope="module")
def sbx_deployment() -> Iterator[Deployment]:
    with deployment(SBX_DOCKER_IMAGE=BUSYBOX, SBX_LOCAL_KILL_GRACE="0.5",
                    SBX_DOCKER_KILL_GRACE="0.5",
                    SBX_ALLOWED_BACKENDS="local,docker") as running:  # fmt: skip
        try:
            yield running
        finally:
            remove_containers(running.worker_id)


@pytest.fixture(params=["local", "docker"])
async def sandbox_env(
    request: pytest.FixtureRequest, sbx_deployment: Deployment
) -> AsyncIterator[SandboxEnvironment]:
    """A fresh sample's sbx sandbox on the backend of the parameter."""
    if request.param == "docker":
        request.getfixturevalue("docker_client_ready")
    config = SbxSandboxConfig(backend=request.param, session_prefix="selfcheck")
    environments = await SbxSandboxEnvironment.sample_init("self-check", config, {})
    env = environments["default"]
    assert isinstance(env, SbxSandboxEnvironment)
    name: str = request.node.originalname
    reason = (
        NOT_SBX.get(name)
        or IMAGE_LACKS.get(request.param, {}).get(name)
        # The local jail's root holds no capabilities: there, modes bind even for uid 0.
        or (AS_ROOT.get(name) if env.uid == "0" and request.param != "local" else None)
    )
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    yield env
    await SbxSandboxEnvironment.sample_cleanup("self-check", config, environments, False)


def test_every_check_was_collected(request: pytest.FixtureRequest) -> None:
    """The star import brought inspect's checks here (a silent zero would pass nothing)."""
    from inspect_ai.util._sandbox import self_check

    names: list[Any] = [n for n in self_check.__all__ if n.startswith("test_")]
    assert len(names) > 40
    assert all(name in globals() for name in names)
