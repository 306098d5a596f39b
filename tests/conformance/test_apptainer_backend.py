"""apptainer backend: command lines through the stand-in, and a real apptainer when present."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from environments import conformance
from environments.backends.apptainer import ApptainerConfig, ApptainerEnvironment, instance_name
from tests.fixtures_backends import FAKES, KILL_GRACE, Factory


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_instance_lifecycle_command_lines(apptainer_factory: Factory, fake_apptainer: Path) -> None:
    env = apptainer_factory("app-cmdline")
    assert isinstance(env, ApptainerEnvironment)
    assert env.exec("echo hi").output == "hi\n"
    name = instance_name("app-cmdline")
    calls = _calls(fake_apptainer)
    start = calls[0]
    assert start[:2] == ["instance", "start"]
    for flag in ("--containall", "--no-home", "--writable-tmpfs", "--no-privs", "--net"):
        assert flag in start
    assert start[start.index("--network") + 1] == "none"
    assert start[-1] == name
    # Every exec: a clean environment, and root without capabilities (--no-privs).
    exec_flags = ["exec", "--cleanenv", "--no-privs"]
    assert [*exec_flags, "--pwd", "/tmp", f"instance://{name}", "sh", "-s"] in calls
    result = env.exec("sleep 999", timeout=0.3)
    assert result.exit_code == 124
    kills = [c for c in _calls(fake_apptainer) if c[:4] == [*exec_flags, f"instance://{name}"]]
    assert kills and kills[0][4:6] == ["sh", "-c"]
    env.close()
    assert ["instance", "stop", name] in _calls(fake_apptainer)
    env.close()
    assert _calls(fake_apptainer).count(["instance", "stop", name]) == 1


def test_instance_has_no_network(apptainer_factory: Factory) -> None:
    env = apptainer_factory("app-net")
    interfaces = env.exec("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
    assert interfaces == ["lo"]


def test_image_is_required(fake_apptainer: Path) -> None:
    from environments.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="SBX_APPTAINER_IMAGE"):
        ApptainerEnvironment("app-noimage", config=ApptainerConfig(image=None))


def _real_apptainer() -> str | None:
    for name in ("apptainer", "singularity"):
        path = shutil.which(name)
        if path and Path(path).resolve().parent != FAKES.resolve():
            return path
    return None


@pytest.mark.skipif(_real_apptainer() is None, reason="no real apptainer/singularity on PATH")
@pytest.mark.parametrize("check", ["exec_output", "state_persists", "timeout_kills_tree", "files"])
def test_real_apptainer(check: str, apptainer_rootfs: Path) -> None:
    """Runs where apptainer is installed (never in this project's CI, which cannot install it)."""
    image = os.environ.get("SBX_APPTAINER_IMAGE") or str(apptainer_rootfs)
    config = ApptainerConfig(image=image, binary=_real_apptainer(), kill_grace=KILL_GRACE)
    conformance.CHECKS[check](lambda sid: ApptainerEnvironment(sid, config=config))
