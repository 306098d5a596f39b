"""Fixtures for the process registry: a private SBX_HOME, a spool, a real local environment."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from process_registry.registry import ProcessRegistry
from tests.helpers import short_tmpdir

if importlib.util.find_spec("process_registry.redact") is None:  # pragma: no cover
    # redact.py is written concurrently by another engineer. Until it lands, a
    # minimal stand-in with the same API keeps these tests about *this*
    # package's wiring (everything persisted goes through redact_text).
    _stub = types.ModuleType("process_registry.redact")
    _PATTERN = re.compile(r"ghp_[A-Za-z0-9]{36}|sk-[A-Za-z0-9_-]{20,}|(?<=password=)\S+")

    def _redact_text(text: str) -> str:
        return _PATTERN.sub("[REDACTED]", text)

    _stub.redact_text = _redact_text  # type: ignore[attr-defined]
    sys.modules["process_registry.redact"] = _stub

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-" + "proj" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
PASSWORD = "hunter2-Sup3rS3cret"
SECRETS = (GITHUB, OPENAI, PASSWORD)


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
def registry(home: Path, env: LocalEnvironment, spool: Path) -> Iterator[ProcessRegistry]:
    reg = ProcessRegistry(home, lambda rec: env, spool_dir=spool, kill_grace=1.0)
    yield reg
    reg.close()
