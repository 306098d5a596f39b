"""Registers the suite's fixture modules (fixtures themselves live in ``tests/fixtures_*.py``)
and schedules the tests over pytest-xdist's processes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from environments.dispositions import pass_on_default_dispositions

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
SHARED_SCOPE = "shared-sandboxes"


def scope_of(root: Path, nodeid: str) -> str:
    """The xdist scope of test ``nodeid`` (relative to ``root``): its file, or
    ``shared-sandboxes`` for every file whose text touches docker, ssh or apptainer."""
    file = nodeid.split("::", 1)[0]
    path = root / file
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return SHARED_SCOPE if _SHARED_SANDBOXES.search(text) else file


class _FileScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist scheduling by :func:`scope_of`: a file's tests run on one process (module
    fixtures start once), and every file touching shared sandboxes runs on the same one.

    The scope is computed here from the node id rather than from ``xdist_group`` marks:
    xdist turns marks into node-id suffixes through a private attribute of pytest's
    items, which pytest 9 no longer reads, so marks silently stopped grouping."""

    def __init__(self, config: pytest.Config, log: object) -> None:
        super().__init__(config, log)
        self._root = Path(str(config.rootpath))
        self._scopes: dict[str, str] = {}

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        if file not in self._scopes:
            self._scopes[file] = scope_of(self._root, nodeid)
        return self._scopes[file]


def pytest_configure(config: pytest.Config) -> None:
    """The suite's sandboxes (backends run in this process, the fake cloud services'
    commands) see every signal at its default even when the suite was started with some
    ignored (``nohup``, a script's ``&``), as a worker's sandboxes do."""
    pass_on_default_dispositions()


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """The suite's scheduler for ``--dist loadgroup`` (what ``tests/run`` asks for); any
    other ``--dist`` keeps xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return _FileScheduling(config, log)
