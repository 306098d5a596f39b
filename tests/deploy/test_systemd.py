"""deploy/systemd: the unit passes ``systemd-analyze verify`` (in a root made of this
machine's systemd units, the unit and a stand-in sbx executable) and is hardened; its
environment file holds valid settings."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO, require
from worker.settings import Settings

UNIT = REPO / "deploy" / "systemd" / "sbx-worker.service"
ENV_FILE = REPO / "deploy" / "systemd" / "sbx-worker.env"
SYSUSERS = REPO / "deploy" / "systemd" / "sbx.sysusers"


def verify(unit_text: str, root: Path, *, with_executable: bool = True) -> str:
    """``systemd-analyze verify --root`` of ``unit_text``; everything it printed."""
    analyze = shutil.which("systemd-analyze")
    require(analyze is not None, "systemd-analyze is not installed (apt-get install systemd)")
    assert analyze is not None
    units = Path("/usr/lib/systemd/system")
    require(units.is_dir(), "this machine has no systemd units to verify against")
    (root / "usr/lib/systemd").mkdir(parents=True)
    shutil.copytree(units, root / "usr/lib/systemd/system", symlinks=True)
    (root / "lib").symlink_to("usr/lib")
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/sbx").mkdir(parents=True)
    shutil.copy(ENV_FILE, root / "etc/sbx/worker.env")
    target = root / "etc/systemd/system" / UNIT.name
    target.write_text(unit_text)
    if with_executable:
        exe = root / "opt/sbx/bin/sbx"
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    done = subprocess.run([analyze, "verify", f"--root={root}", str(target)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    return f"{done.returncode}\n{done.stdout}{done.stderr}".strip()


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert verify(UNIT.read_text(), tmp_path) == "0"


@pytest.mark.parametrize(
    ("change", "complaint"),
    [(("KillMode=process", "KillMode=gently"), "kill mode"),
     (("ProtectSystem=strict", "ProtectSytem=strict"), "Unknown key")],
)  # fmt: skip
def test_verify_reports_a_broken_unit(
    tmp_path: Path, change: tuple[str, str], complaint: str
) -> None:
    broken = UNIT.read_text().replace(*change)
    assert complaint.lower() in verify(broken, tmp_path).lower()


def test_verify_reports_a_missing_executable(tmp_path: Path) -> None:
    out = verify(UNIT.read_text(), tmp_path, with_executable=False)
    assert out.startswith("1") and "/opt/sbx/bin/sbx" in out


def unit_service() -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return dict(parser["Service"])


def env_settings() -> dict[str, str]:
    values = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_the_unit_is_hardened_and_outlasts_the_shutdown_grace() -> None:
    service = unit_service()
    assert service["User"] == "sbx" and service["Group"] == "sbx"
    assert service["Restart"] == "on-failure"
    # SIGTERM to the worker alone; its sessions' background processes are left running.
    assert (service["KillMode"], service["KillSignal"]) == ("process", "SIGTERM")
    grace = float(env_settings()["SBX_SHUTDOWN_GRACE"])
    assert float(service["TimeoutStopSec"]) > grace
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "ProtectHome": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
                       "StateDirectoryMode": "0700", "UMask": "0077"}.items():  # fmt: skip
        assert service[key] == value, key
    assert service["ExecStart"].split()[1:] == ["worker"]
    assert "sbx" in SYSUSERS.read_text().split()


def test_the_environment_file_holds_valid_settings_and_no_secret() -> None:
    values = env_settings()
    assert all(k.startswith("SBX_") for k in values)
    assert "SBX_SECRET_KEY" not in values  # commented out: operators add their own
    Settings(**{k[4:].lower(): v for k, v in values.items()})  # type: ignore[arg-type]
