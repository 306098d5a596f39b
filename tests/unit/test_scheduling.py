"""How the suite's tests are spread over pytest-xdist processes (``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_SCOPE, scope_of
from tests.helpers import REPO


def test_a_files_tests_share_its_scope_and_sandbox_files_share_one(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_a() -> None: ...\n")
    (tmp_path / "test_box.py").write_text("IMAGE = 'docker image'\n")
    (tmp_path / "test_remote.py").write_text("import asyncssh\n")
    assert scope_of(tmp_path, "test_plain.py::test_a") == "test_plain.py"
    assert scope_of(tmp_path, "test_plain.py::test_b[x@y]") == "test_plain.py"
    assert scope_of(tmp_path, "test_box.py::test_a") == SHARED_SCOPE
    assert scope_of(tmp_path, "test_remote.py::T::test_c") == SHARED_SCOPE


def test_the_deploy_tests_building_one_image_run_on_one_process() -> None:
    # Both build sbx:deploy-test in a session fixture: on two processes the builds collided.
    image = scope_of(REPO, "tests/deploy/test_image.py::test_x")
    assert image == scope_of(REPO, "tests/deploy/test_compose.py::test_y") == SHARED_SCOPE
