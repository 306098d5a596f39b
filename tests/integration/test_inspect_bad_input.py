"""The ``sbx`` inspect sandbox against input a model may write: errors inspect maps to a
tool error the model reads, never one that fails the sample or calls the sandbox gone.

A real worker (local backend) serves one sample; each check costs a few calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from tests.helpers import require_module
from tests.integration.deployment import Deployment, deployment

require_module("inspect_ai", "pip install 'sbx[inspect]'")

from inspect_ai.util import SandboxEnvironment  # noqa: E402

from worker.integrations.inspect_provider import (  # noqa: E402
    SbxSandboxConfig,
    SbxSandboxEnvironment,
)


@pytest.fixture(scope="module")
def sbx_deployment() -> Iterator[Deployment]:
    with deployment() as running:
        yield running


@pytest.fixture
async def sandbox(sbx_deployment: Deployment) -> AsyncIterator[SandboxEnvironment]:
    config = SbxSandboxConfig(backend="local", session_prefix="badinput")
    environments = await SbxSandboxEnvironment.sample_init("bad-input", config, {})
    try:
        yield environments["default"]
    finally:
        await SbxSandboxEnvironment.sample_cleanup("bad-input", config, environments, False)


async def test_a_nul_byte_is_the_error_inspect_gives_the_model(
    sandbox: SandboxEnvironment,
) -> None:
    """A NUL byte in a command, a variable or a path raises CPython's own
    ``ValueError("embedded null byte")``, which inspect turns into a parsing error for
    the model (a ``SandboxUnavailableError`` said the sandbox was gone; the
    ``OSError`` of a file call failed the sample)."""
    attempts: list[Callable[[], Awaitable[object]]] = [
        lambda: sandbox.exec(["echo", "a\0b"]),
        lambda: sandbox.exec(["env"], env={"A": "x\0y"}),
        lambda: sandbox.exec(["pwd"], cwd="a\0b"),
        lambda: sandbox.read_file("a\0b"),
        lambda: sandbox.write_file("a\0b", "x"),
    ]
    for attempt in attempts:
        with pytest.raises(ValueError, match=r"^embedded null byte$"):
            await attempt()
    assert (await sandbox.exec(["echo", "still here"])).stdout == "still here\n"
