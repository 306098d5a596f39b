"""Detection cases: positives per family, hardline, false-positive guards, obfuscation."""

from __future__ import annotations

import pytest

from registry.approval import detect_dangerous_command, detect_hardline_command
from registry.approval.detect import ALL_PATTERN_KEYS, HARDLINE_KEYS, analyze_command

from .cases_dangerous import DANGEROUS, HARDLINE
from .cases_evasion import BENIGN, MENTIONS, OBFUSCATED


@pytest.mark.parametrize(("command", "key"), DANGEROUS)
def test_dangerous(command: str, key: str) -> None:
    dangerous, got_key, description = detect_dangerous_command(command)
    assert dangerous, command
    assert got_key == key, (command, got_key)
    assert description
    # Non-hardline family members must not be hardline.
    assert detect_hardline_command(command) == (False, None), command


@pytest.mark.parametrize(("command", "key"), HARDLINE)
def test_hardline(command: str, key: str) -> None:
    hard, description = detect_hardline_command(command)
    assert hard, command
    assert description
    dangerous, got_key, _ = detect_dangerous_command(command)
    assert dangerous
    assert got_key == key, (command, got_key)
    assert got_key in HARDLINE_KEYS


@pytest.mark.parametrize(("command", "key"), OBFUSCATED)
def test_obfuscated(command: str, key: str) -> None:
    dangerous, got_key, _ = detect_dangerous_command(command)
    assert dangerous, repr(command)
    assert got_key == key, (command, got_key)
    assert detect_hardline_command(command)[0] == (key in HARDLINE_KEYS), repr(command)


@pytest.mark.parametrize("command", BENIGN)
def test_benign(command: str) -> None:
    assert detect_dangerous_command(command) == (False, None, None), command
    assert detect_hardline_command(command) == (False, None), command


@pytest.mark.parametrize("command", MENTIONS)
def test_mentions_are_not_commands(command: str) -> None:
    assert detect_dangerous_command(command) == (False, None, None), command
    assert detect_hardline_command(command) == (False, None), command


def test_case_count() -> None:
    # The issue asks for at least 200 cases across families.
    assert len(DANGEROUS) + len(HARDLINE) + len(OBFUSCATED) + len(BENIGN) + len(MENTIONS) >= 200


def test_every_key_is_registered() -> None:
    used = {k for _, k in DANGEROUS + HARDLINE + OBFUSCATED}
    assert used <= ALL_PATTERN_KEYS


def test_compound_reports_all_findings() -> None:
    analysis = analyze_command("docker compose down && pip uninstall -y x && rm -rf build")
    keys = [f.key for f in analysis.findings]
    assert keys == ["container_lifecycle", "package_uninstall", "recursive_delete"]
    assert not analysis.simple


def test_hardline_reported_before_other_findings() -> None:
    dangerous, key, _ = detect_dangerous_command("rm -rf build; rm -rf /")
    assert dangerous and key == "delete_root"


@pytest.mark.parametrize(
    "command",
    [
        "",
        "   ",
        "'",
        '"',
        "$(",
        "`",
        "${",
        "<(",
        "echo $'\\x",
        "a" * 100_000,
        "(" * 5000,
        "$(" * 3000,
        "\\",
        "cat <<",
        "cat <<EOF",
        "\x00\x1b[\x9b",
        "\ud800",
        "\uff52" * 1000,
        "; ; && || | |",
        "bash -c",
        "xargs",
        "find -exec",
        "kill",
        "docker",
        "powershell -enc",
        "python3 -c",
    ],
)
def test_never_raises(command: str) -> None:
    result = detect_dangerous_command(command)
    assert isinstance(result, tuple) and len(result) == 3
    assert isinstance(detect_hardline_command(command), tuple)


def test_deep_nesting_is_flagged_not_crashing() -> None:
    command = "echo hi"
    for _ in range(12):
        command = f"echo $({command})"
    dangerous, key, _ = detect_dangerous_command(command)
    assert dangerous and key == "nesting_too_deep"
