"""Configuration loading, caching, allowlist persistence and rule matching."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
import yaml

from registry.approval import ApprovalConfigError, ApprovalConfigSource, analyze_command
from registry.approval.config import ApprovalSettings, Rules


def test_defaults_without_file(tmp_path: Path) -> None:
    settings, rules = ApprovalConfigSource(tmp_path / "missing.yaml").get()
    assert settings.mode == "manual" and settings.timeout == 300
    assert settings.relaxed_keys("docker") == frozenset()
    assert rules.allow_keys == frozenset() and rules.deny_globs == ()


def test_first_load_of_invalid_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    for text in ("- just\n- a list\n", "approvals: {mode: sometimes}\n", "approvals: [1\n"):
        path.write_text(text)
        with pytest.raises(ApprovalConfigError):
            ApprovalConfigSource(path)


def test_keys_at_top_level_or_under_approvals(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "approvals": {"command_allowlist": ["recursive_delete"]},
                "command_denylist": ["curl*"],
            }
        )
    )
    settings, rules = ApprovalConfigSource(path).get()
    assert rules.allow_keys == {"recursive_delete"}
    assert rules.deny_globs == ("curl*",)
    assert settings.command_denylist == ["curl*"]


def test_add_allowlist_entries_atomic_and_private(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.yaml"
    source = ApprovalConfigSource(path)
    source.add_allowlist_entries(["recursive_delete", "package_uninstall"])
    source.add_allowlist_entries(["recursive_delete"])  # no duplicates
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert yaml.safe_load(path.read_text())["command_allowlist"] == [
        "recursive_delete",
        "package_uninstall",
    ]
    assert source.get()[1].allow_keys == {"recursive_delete", "package_uninstall"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.yaml", "config.yaml.lock"]


def test_concurrent_appends_from_two_sources_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    a, b = ApprovalConfigSource(path), ApprovalConfigSource(path)
    keys = [f"entry {i}" for i in range(20)]
    threads = [
        threading.Thread(target=(a if i % 2 else b).add_allowlist_entries, args=([k],))
        for i, k in enumerate(keys)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(yaml.safe_load(path.read_text())["command_allowlist"]) == sorted(keys)


def test_memory_only_allowlist_without_path() -> None:
    source = ApprovalConfigSource(None, overrides={"mode": "off"})
    source.add_allowlist_entries(["recursive_delete"])
    settings, rules = source.get()
    assert settings.mode == "off" and "recursive_delete" in rules.allow_keys


def test_reload_and_change_detection(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("approvals: {mode: off}\n")
    source = ApprovalConfigSource(path)
    assert source.get()[0].mode == "off"
    path.write_text(
        "approvals: {mode: smart}\n"
    )  # same size, likely same mtime tick: inode is unchanged
    os.utime(path, ns=(1, 1))
    assert source.get()[0].mode == "smart"
    assert source.reload()[0].mode == "smart"
    path.unlink()
    assert source.get()[0].mode == "manual"


def _rules(allow: list[str] | None = None, deny: list[str] | None = None) -> Rules:
    return Rules.from_settings(
        ApprovalSettings(command_allowlist=allow or [], command_denylist=deny or [])
    )


@pytest.mark.parametrize(
    ("entry", "command", "denied"),
    [
        ("git push", "git push", True),
        ("git push", "git push origin main", True),
        ("git push", "git pushx", False),
        ("git push", "ls; git push", True),
        ("git push", "sudo git push", True),
        ("curl*", "echo $(curl x)", True),
        ("package_uninstall", "pip uninstall x", True),
        ("package_uninstall", "pip install x", False),
        ("rm -rf *", "rm -rf build", True),
    ],
)
def test_deny_rules(entry: str, command: str, denied: bool) -> None:
    assert (_rules(deny=[entry]).denied(analyze_command(command)) is not None) is denied


@pytest.mark.parametrize(
    ("entry", "command", "allowed"),
    [
        ("rm -rf build", "rm -rf build", True),
        ("rm -rf build", "rm -rf build2", False),
        ("rm -rf build*", "rm -rf build2", True),
        ("rm -rf build*", "rm -rf build; rm -rf ~", False),
        ("rm -rf build*", "rm -rf build $(id)", False),
        ("rm -rf build*", "sudo rm -rf build", False),
        ("rm -rf build*", "rm -rf build '", False),
    ],
)
def test_allow_text_entries(entry: str, command: str, allowed: bool) -> None:
    assert _rules(allow=[entry]).allowed_text(analyze_command(command)) is allowed
