"""The approval policy: loading, reloading only on request, loosening logged, rules."""

from __future__ import annotations

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


def test_overrides_apply_without_a_file() -> None:
    settings, _ = ApprovalConfigSource(None, overrides={"mode": "off"}).get()
    assert settings.mode == "off"


def test_a_changed_file_takes_effect_only_on_reload_and_loosening_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"command_denylist": ["git push*"]}))
    source = ApprovalConfigSource(path)
    # What a sandbox writing the file would do: it changes nothing in force.
    path.write_text(yaml.safe_dump({"approvals": {"mode": "off"}, "command_allowlist": ["x"]}))
    assert source.get()[0].mode == "manual"
    assert source.get()[0].command_denylist == ["git push*"]
    with caplog.at_level("WARNING", logger="registry.approval.config"):
        assert source.reload()[0].mode == "off"
    said = " | ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "mode manual -> off" in said
    assert "command_allowlist gained ['x']" in said and "command_denylist lost" in said


def test_a_reload_that_tightens_logs_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"approvals": {"mode": "smart"}}))
    source = ApprovalConfigSource(path)
    path.write_text(yaml.safe_dump({"approvals": {"mode": "manual"}, "command_denylist": ["y"]}))
    with caplog.at_level("WARNING", logger="registry.approval.config"):
        assert source.reload()[0].mode == "manual"
    assert [r for r in caplog.records if r.levelname == "WARNING"] == []


def test_a_broken_file_on_reload_keeps_the_policy_in_force(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"command_denylist": ["git push*"]}))
    source = ApprovalConfigSource(path)
    path.write_text("approvals: [half-written\n")
    assert source.reload()[0].command_denylist == ["git push*"]


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
