"""Fixtures for the process table: a private SBX_HOME, a spool, a real local environment."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from process_registry.table import ProcessTable
from tests.helpers import short_tmpdir


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmpdir("sbx-pr-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    return tmp_path / "spool"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[LocalEnvironment]:
    e = LocalEnvironment("s-owner", LocalConfig(cwd=str(tmp_path), kill_grace=0.5))
    yield e
    e.close()


@pytest.fixture
def table(home: Path, env: LocalEnvironment, spool: Path) -> Iterator[ProcessTable]:
    reg = ProcessTable(home, lambda rec: env, spool_dir=spool, kill_grace=1.0)
    yield reg
    reg.close()
