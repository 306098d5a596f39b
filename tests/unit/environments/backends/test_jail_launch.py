"""bubblewrap's own start: the binary and environment the worker gives it (launch.py)."""

from __future__ import annotations

import os

import pytest

from environments.backends.local.launch import bwrap_binary, environment_options
from environments.errors import BackendUnavailable


def test_the_environment_travels_as_options() -> None:
    assert environment_options({"A": "1", "B": "x y"}) == [
        "--clearenv", "--setenv", "A", "1", "--setenv", "B", "x y",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "env", [{"A": "x\0--bind\0/\0/h"}, {"A\0--bind": "1"}, {"A=B": "1"}, {"": "1"}]
)
def test_what_no_environment_can_hold_is_refused_not_passed(env: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        environment_options(env)


def test_bwrap_is_found_on_the_workers_path_only(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailable):
        bwrap_binary("bwrap")
    fake = os.path.join(tmp_path, "bwrap")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(fake, 0o755)
    assert bwrap_binary("bwrap") == fake
