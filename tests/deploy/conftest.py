"""Fixtures of the deploy tests: the worker image built for real from this checkout.

The image is built once per test session by ``deploy/image/build.sh`` on the local
base image that ``tests/services/deploy_images.sh`` makes with debootstrap (no registry
image can be pulled here). Without a Docker engine or that base image the tests skip
locally and fail in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers import REPO, require

BASE_IMAGE = os.environ.get("SBX_BASE_IMAGE", "sbx-base:bookworm")
REDIS_IMAGE = os.environ.get("SBX_CI_REDIS_IMAGE", "sbx-ci-redis:latest")
IMAGE = "sbx:deploy-test"


def docker(*args: str, timeout: float = 300, check: bool = True) -> str:
    """Run the docker CLI; its stdout."""
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _have(image: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture(scope="session")
def engine() -> None:
    require(shutil.which("docker") is not None, "the docker CLI is not installed")
    ok = subprocess.run(["docker", "version"], capture_output=True, check=False).returncode == 0
    require(ok, "no Docker engine answers (sh tests/services/backends.sh)")


@pytest.fixture(scope="session")
def sbx_image(engine: None) -> Iterator[str]:
    """``sbx:deploy-test``, built from this checkout on the debootstrap base."""
    require(_have(BASE_IMAGE), f"no {BASE_IMAGE} image (sh tests/services/deploy_images.sh)")
    env = {**os.environ, "BASE_IMAGE": BASE_IMAGE}
    done = subprocess.run(
        ["sh", str(REPO / "deploy" / "image" / "build.sh"), IMAGE],
        env=env, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    yield IMAGE


@pytest.fixture(scope="session")
def redis_image(engine: None) -> str:
    require(_have(REDIS_IMAGE), f"no {REDIS_IMAGE} image (sh tests/services/deploy_images.sh)")
    return REDIS_IMAGE
