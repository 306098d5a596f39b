"""``sbx doctor`` on installations that lack a piece, as a user runs it: it tells a
backend whose own module is missing from one whose SDK is absent or broken, and says
what fixes each (never an extra that cannot help)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import worker_env
from tests.helpers import REPO

# Makes the modules named in $TEST_ABSENT_MODULES impossible to import, as if they were
# not installed (site imports it from PYTHONPATH at start-up).
ABSENT = """
import os, sys

_ABSENT = set(filter(None, os.environ.get("TEST_ABSENT_MODULES", "").split(",")))


class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name in _ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Absent())
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory for PYTHONPATH: the import blocker, and room for plugins and packages."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "sitecustomize.py").write_text(ABSENT)
    return root


def doctor(home: Path, site: Path, *, absent: str = "", human: bool = False) -> Any:
    env = worker_env(home, None, TEST_ABSENT_MODULES=absent)
    env["PYTHONPATH"] = f"{REPO}:{site}"
    args = ["doctor"] if human else ["doctor", "--json"]
    p = subprocess.run([sys.executable, "-m", "worker.cli.main", *args], env=env,
                       cwd=str(REPO), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout if human else json.loads(p.stdout)["backends"]


def plugin(site: Path, name: str, target: str) -> None:
    """An installed distribution whose ``sbx.environments`` entry point is ``target``."""
    dist = site / f"sbx_{name}_plugin-0.1.dist-info"
    dist.mkdir()
    meta = f"Metadata-Version: 2.1\nName: sbx-{name}-plugin\nVersion: 0.1\n"
    (dist / "METADATA").write_text(meta)
    (dist / "entry_points.txt").write_text(f"[sbx.environments]\n{name} = {target}\n")


def test_an_absent_sdk_names_the_extra_that_installs_it(sbx_home: Path, site: Path) -> None:
    report = doctor(sbx_home, site, absent="docker,asyncssh")
    for backend, extra in (("docker", "docker"), ("ssh", "ssh")):
        entry = report[backend]
        assert entry["available"] is False
        assert "SDK is not installed" in entry["reason"]
        assert f"pip install 'sbx[{extra}]'" in entry["reason"]
        assert "has no" not in entry["reason"]
    assert report["local"] == {"available": True, "reason": "ok"}
    text = doctor(sbx_home, site, absent="docker", human=True)
    assert "no  docker: the docker backend's SDK is not installed" in text


def test_a_missing_backend_module_says_reinstall_sbx_not_an_extra(
    sbx_home: Path, site: Path
) -> None:
    report = doctor(sbx_home, site, absent="environments.backends.docker.environment")
    reason = report["docker"]["reason"]
    assert report["docker"]["available"] is False
    assert "has no docker backend" in reason and "reinstall sbx" in reason
    assert "sbx[docker]" not in reason


def test_an_sdk_that_does_not_import_says_upgrade(sbx_home: Path, site: Path) -> None:
    # An installed docker package that fails on import (a version sbx was not built for).
    (site / "docker").mkdir()
    (site / "docker" / "__init__.py").write_text(
        "raise ImportError(\"cannot import name 'APIClient' from 'docker.api'\")\n"
    )
    reason = doctor(sbx_home, site)["docker"]["reason"]
    assert "installed but does not import" in reason
    assert "pip install --upgrade 'sbx[docker]'" in reason


def test_plugins_missing_their_module_or_their_sdk(sbx_home: Path, site: Path) -> None:
    plugin(site, "ghost", "sbx_ghost_backend.environment:GhostEnvironment")
    (site / "sbx_needy_backend").mkdir()
    (site / "sbx_needy_backend" / "__init__.py").write_text("")
    (site / "sbx_needy_backend" / "environment.py").write_text("import needy_cloud_sdk\n")
    plugin(site, "needy", "sbx_needy_backend.environment:NeedyEnvironment")
    report = doctor(sbx_home, site)
    ghost, needy = report["ghost"]["reason"], report["needy"]["reason"]
    assert "plugin that registers the ghost backend is incomplete" in ghost
    assert "reinstall that plugin" in ghost and "sbx[" not in ghost
    assert "needs module 'needy_cloud_sdk', which is not installed" in needy
    assert "plugin that registers it" in needy and "sbx[" not in needy
