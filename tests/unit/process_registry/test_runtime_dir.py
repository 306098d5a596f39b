"""The runtime directory: private, never a predictable name in /tmp, a squatter costs nothing."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from process_registry.runtime_dir import runtime_dir


@pytest.fixture(autouse=True)
def _no_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_random_private_directory_found_again_through_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = runtime_dir(home)
    assert first.parent == Path(tempfile.gettempdir()) and _mode(first) == 0o700
    assert first == runtime_dir(home)  # every process of the home finds the same one
    assert (home / "runtime-dir").read_text() == str(first)
    other = runtime_dir(tmp_path / "other-home")
    assert other != first


def test_a_squatted_or_swapped_directory_is_replaced_not_used(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = runtime_dir(home)
    first.rmdir()
    first.symlink_to(tmp_path)  # swapped for a link
    second = runtime_dir(home)
    assert second != first and not second.is_symlink() and _mode(second) == 0o700
    os.chmod(second, 0o777)  # opened up: no longer private
    third = runtime_dir(home)
    assert third not in (first, second)


def test_xdg_runtime_dir_when_it_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:  # fmt: skip
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    path = runtime_dir(tmp_path / "home")
    assert path.parent == xdg and path.name.startswith("sbx-") and _mode(path) == 0o700
    os.chmod(xdg, 0o777)  # a shared directory is no place for it
    assert runtime_dir(tmp_path / "home").parent != xdg
