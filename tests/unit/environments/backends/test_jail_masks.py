"""A masked path stays where it is: the sandbox cannot move it out from under its mask.

A mask hides a path, not the directories above it. With ``SBX_HOME`` at
``<workspace>/state/.sbx`` the sandbox could ``mv state moved`` through the
workspace's read-write bind, kill its shell, and read ``moved/.sbx/secret.key`` in
the fresh jail, which masks the configured path only. Every such attack runs here
from inside a real jailed session shell and must fail; the host's files stay put.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest

from environments.backends.local.environment import LocalConfig, LocalEnvironment
from environments.backends.local.jail import Jail
from environments.config import WorkerContext
from environments.shell.framing import shell_quote
from tests.fixtures_backends import require_jail

KEY = "k3y-of-the-worker-0123456789abcdef"


@pytest.fixture(autouse=True)
def _jail() -> None:
    require_jail()


def _worker_config(tmp_path: Path, workspace: Path, private: Path, *binds: Path) -> LocalConfig:
    """The local backend's config as a worker completes it: ``private`` is its SBX_HOME."""
    context = WorkerContext(state_dir=str(tmp_path / "runtime" / "sandboxes" / "local"),
                            private_paths=(str(private), str(tmp_path / "runtime")))  # fmt: skip
    config = LocalConfig(cwd=str(workspace), binds=tuple(map(str, binds)), kill_grace=0.5)
    return config.for_worker(context)


def _between(top: Path, path: Path) -> list[Path]:
    """The directories strictly between ``top`` and ``path``, outermost first."""
    return [top / Path(*path.relative_to(top).parts[:n])
            for n in range(1, len(path.relative_to(top).parts))]  # fmt: skip


LAYOUTS = {
    # name: (the writable mount that shows it, where the private directory is below it)
    "home-in-workspace": ("work", "state/.sbx"),
    "home-at-top-of-workspace": ("work", ".sbx"),
    "home-deep-in-workspace": ("work", "a/b/c/.sbx"),
    "runtime-in-a-bind": ("outer", "xdg/sbx-0123abcd"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_private_directory_under_a_writable_mount_cannot_be_moved_away(
    layout: str, tmp_path: Path
) -> None:
    top_name, below = LAYOUTS[layout]
    workspace, outer = tmp_path / "work", tmp_path / "outer"
    workspace.mkdir()
    outer.mkdir()
    top = tmp_path / top_name
    private = top / below
    private.mkdir(parents=True)
    (private / "secret.key").write_text(KEY)
    binds = (outer,) if top == outer else ()
    env = LocalEnvironment("mover", _worker_config(tmp_path, workspace, private, *binds))
    try:
        assert "No such file" in env.exec(f"cat {shell_quote(str(private))}/secret.key").output
        # Every directory on the way down is still the sandbox's to write in ...
        for d in _between(top, private):
            q = shell_quote(str(d))
            r = env.exec(f"touch {q}/mine && rm {q}/mine && echo writable")
            assert r.output == "writable\n"
        # ... but none can be moved or removed, nor the private directory itself.
        for d in [*_between(top, private), private]:
            q = shell_quote(str(d))
            elsewhere = shell_quote(str(top / "elsewhere"))
            r = env.exec(f"mv {q} {q}.moved && echo MOVED; rm -rf {q}; rmdir {q} && echo GONE; "
                         f"mv {q} {elsewhere} && echo MOVED; kill -9 $$")  # fmt: skip
            assert "busy" in r.output and "MOVED" not in r.output and "GONE" not in r.output
            # The next call runs in a fresh jail, which masks what is configured.
            r = env.exec(f"find {shell_quote(str(top))} -name secret.key; "
                         f"grep -rs {KEY[:12]} {shell_quote(str(top))}; echo searched")  # fmt: skip
            assert r.output == "searched\n", r.output
        # On the host the key is where the worker keeps it, and nowhere else (``mv`` may
        # have copied what the sandbox saw of a directory: the empty mask).
        assert list(top.glob("**/secret.key")) == [private / "secret.key"]
        assert (private / "secret.key").read_text() == KEY
    finally:
        env.close()


def test_a_worker_whose_private_paths_are_elsewhere_adds_no_mount(tmp_path: Path) -> None:
    """The default layout (SBX_HOME and the runtime directory outside every bind) is the
    same as before: the workspace, the session's /tmp, home and process files."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    home = tmp_path / "home" / ".local" / "state" / "sbx"
    home.mkdir(parents=True)
    jail = Jail(_worker_config(tmp_path, workspace, home), "plain", str(workspace), "/root")
    binds = [m.dest for m in jail.mounts if m.kind == "bind"]
    assert binds == ["/tmp", "/root", str(workspace), str(jail.dirs.proc)]


def test_guard_mounts_sit_between_the_mount_and_the_mask(tmp_path: Path) -> None:
    """The layout itself: the directories between the workspace and SBX_HOME are bound
    onto themselves after the workspace and before the mask, which stays last."""
    workspace = tmp_path / "work"
    home = workspace / "a" / "b" / ".sbx"
    home.mkdir(parents=True)
    jail = Jail(_worker_config(tmp_path, workspace, home), "layout", str(workspace), "/root")
    dests = [m.dest for m in jail.mounts]
    order = [dests.index(p) for p in (str(workspace), posixpath.dirname(str(home.parent)),
                                      str(home.parent), str(home))]  # fmt: skip
    assert order == sorted(order)
    assert [m.kind for m in jail.mounts if m.dest == str(home)] == ["tmpfs"]
