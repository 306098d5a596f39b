"""Registers the suite's fixture modules (fixtures themselves live in ``tests/fixtures_*.py``)
and groups the tests for pytest-xdist's ``--dist loadgroup``."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest_plugins = [
    name
    for name in (
        "tests.fixtures_workers",
        "tests.fixtures_backends",
        "tests.fixtures_amqp",
        "tests.fixtures_fleet",
        "tests.fixtures_modal",
        "tests.fixtures_vercel",
        "tests.fixtures_daytona",
    )
    if importlib.util.find_spec(name) is not None
]


# Sandboxes whose workers sweep a shared engine or host: an idle reaper removes the
# docker containers (or ssh/apptainer sessions) of any worker that looks gone, by label
# and age, so two files running such workers at once could remove each other's.
_SHARED_SANDBOXES = re.compile(r"docker|ssh|apptainer|singularity")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep a file's tests on one process (module fixtures start once), and every file
    that touches shared sandboxes on one process together."""
    groups: dict[Path, str] = {}
    for item in items:
        path = item.path
        if path not in groups:
            shared = _SHARED_SANDBOXES.search(path.read_text(encoding="utf-8"))
            groups[path] = "shared-sandboxes" if shared else str(path)
        item.add_marker(pytest.mark.xdist_group(groups[path]))
