"""deploy/apt_install.sh: the installs the README's commands and CI make as root wait
for another apt holding its locks (a fresh machine's daily apt run) instead of failing.

Both tests hold a real apt lock from this process, start the script, see it announce
that it waits, then release the lock and check the script carries on. Neither reaches
the network: the package is one already installed, or the package lists live in a
directory of the test's own with no sources behind them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import require

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "apt_install.sh"
WAITING = "waiting for it"


@pytest.fixture(autouse=True)
def _root_with_apt() -> None:
    require(os.geteuid() == 0, "installing packages needs root")
    require(shutil.which("apt-get") is not None, "apt-get is not installed (a Debian machine)")


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """Holds apt's lock ``lock`` the way apt and dpkg take it (an fcntl write lock)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["sh", str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def read_until_waiting(proc: subprocess.Popen[str]) -> str:
    """The script's stderr up to its line saying it waits for the lock."""
    assert proc.stderr is not None
    seen = ""
    while WAITING not in seen:
        line = proc.stderr.readline()
        assert line, f"the script ended without waiting for the lock: {seen!r}"
        seen += line
    return seen


# apt translates its messages (LANGUAGE is honoured under C.UTF-8): the wait must not
# depend on the English text of the lock's error.
@pytest.mark.parametrize(
    "locale", [{}, {"LC_ALL": "C.UTF-8", "LANGUAGE": "de"}], ids=["default", "translated"]
)
def test_an_install_waits_for_the_package_managers_lock(locale: dict[str, str]) -> None:
    installed = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "bubblewrap"], capture_output=True, text=True
    )
    require("install ok installed" in installed.stdout, "bubblewrap is not installed")
    with held(Path("/var/lib/dpkg/lock-frontend")):
        proc = start("--no-install-recommends", "bubblewrap", env=locale)
        waiting = read_until_waiting(proc)
        assert proc.poll() is None, "the script gave up while the lock was held"
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, waiting + err
    assert "another apt or dpkg holds apt's lock" in waiting
    assert out == ""


def test_a_refresh_of_the_package_lists_waits_for_their_lock(tmp_path: Path) -> None:
    # The package is unknown to the empty lists, so the script refreshes them, which
    # takes the lists' lock: apt-get update fails at once on a held one by itself.
    lists = tmp_path / "lists"
    (lists / "partial").mkdir(parents=True)
    config = tmp_path / "apt.conf"
    config.write_text(
        f'Dir::State::Lists "{lists}/";\n'
        f'Dir::Etc::SourceList "{tmp_path / "none.list"}";\n'
        f'Dir::Etc::SourceParts "{tmp_path / "none.d"}/";\n'
    )
    (tmp_path / "none.list").write_text("")
    (tmp_path / "none.d").mkdir()
    with held(lists / "lock"):
        proc = start("sbx-no-such-package", env={"APT_CONFIG": str(config)})
        waiting = read_until_waiting(proc)
        assert proc.poll() is None, "the script gave up while the lock was held"
    _, err = proc.communicate(timeout=120)
    # It refreshed the (empty) lists once the lock was free, then said plainly why the
    # install failed: it did not stop at the lock.
    assert proc.returncode == 1, waiting + err
    assert "Unable to locate package sbx-no-such-package" in err
    assert "could not install: sbx-no-such-package" in err
    assert "lock is still held" not in err


def test_a_lock_held_longer_than_the_limit_is_one_clear_failure() -> None:
    with held(Path("/var/lib/dpkg/lock-frontend")):
        proc = start("bubblewrap", env={"SBX_APT_LOCK_WAIT": "0"})
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "apt_install.sh: apt's lock is still held after 0 s: install -y bubblewrap" in err


def test_a_wait_that_is_not_a_number_of_seconds_is_refused_before_apt_runs() -> None:
    proc = start("bubblewrap", env={"SBX_APT_LOCK_WAIT": "10m"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err == "apt_install.sh: SBX_APT_LOCK_WAIT must be a whole number of seconds, not '10m'\n"
    assert out == ""
