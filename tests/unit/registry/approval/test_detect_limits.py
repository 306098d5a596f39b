"""Bounded cost, the size limit, fail-closed budgets, robustness, and the analysis API."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.approval import (
    DEFAULT_MAX_COMMAND_BYTES,
    ApprovalConfigSource,
    ApprovalGuard,
    CommandTooLong,
    MemoryApprovalStore,
    analyze_command,
    detect_dangerous_command,
    detect_hardline_command,
)
from registry.approval.analyzer import Analyzer
from registry.approval.limits import Budget

PATHOLOGICAL = [
    "a;" * 30_000,
    "a" * 65_000 + "(",
    "python3 -c '" + "exec(" * 12_000 + "'",
    "$(" * 20_000,
    "'" * 60_000,
    "`" * 60_000,
    "${" * 20_000,
    '"$(' * 15_000,
    "cat <<EOF\n" * 6_000,
    "x=$y;" * 10_000,
    "{a,b}" * 5_000,
    "$((1+" * 10_000,
    "\\\n" * 30_000,
    "IFS=,;" * 8_000,
    "for i in a; do " * 4_000,
    "rm -rf " + "a/" * 30_000,
    "echo " + "${x%%*a*a*a*}" * 1_000,
    "a=(" * 20_000,
    "f(){ f|f& };" * 3_000,
    "while true; do " * 4_000,
    "git -c " * 8_000,
    "awk '" + "system(" * 8_000 + "'",
    "| " * 30_000,
    "echo " + "\\x72" * 15_000,
    "psql -c '" + "DELETE FROM t; " * 4_000 + "'",
]


def test_compound_reports_every_finding_and_notices() -> None:
    analysis = analyze_command("docker volume rm data && pip uninstall -y pip && rm -rf src")
    assert [f.key for f in analysis.findings] == [
        "container_lifecycle",
        "package_uninstall",
        "recursive_delete",
    ]
    assert not analysis.simple
    everyday = analyze_command("docker stop web && rm -rf node_modules")
    assert everyday.findings == ()
    assert {n.key for n in everyday.notices} == {"container_lifecycle", "recursive_delete"}


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
        "(" * 5000,
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
        "${x:",
        "${!}",
        "a=(",
        "set --",
        "read <<<",
        "cd",
        "$((",
        "tmux send-keys",
        "git -c",
        "sed -e",
    ],
)
def test_never_raises(command: str) -> None:
    result = detect_dangerous_command(command)
    assert isinstance(result, tuple) and len(result) == 3
    assert isinstance(detect_hardline_command(command), tuple)


def test_deep_nesting_is_flagged_not_crashing() -> None:
    command = "echo hi"
    for _ in range(12):
        command = f"echo $(bash -c {command!r})"
    dangerous, key, _ = detect_dangerous_command(command)
    assert dangerous and key in ("nesting_too_deep", "analysis_budget_exhausted")


@pytest.mark.parametrize("command", PATHOLOGICAL, ids=lambda c: repr(c[:24]))
def test_pathological_input_finishes_and_fails_closed_when_cut_short(command: str) -> None:
    assert len(command.encode()) <= DEFAULT_MAX_COMMAND_BYTES
    analysis = analyze_command(command)
    keys = {f.key for f in analysis.findings}
    if "analysis_budget_exhausted" not in keys:
        # Fully analysed: whatever it found stands; nothing in these is everyday work either.
        assert isinstance(analysis.findings, tuple)


def test_a_megabyte_is_refused_without_analysis() -> None:
    assert detect_dangerous_command("a;" * 500_000)[:2] == (True, "command_too_long")
    assert detect_hardline_command("rm -rf / #" + "a" * 70_000) == (False, None)


def test_size_limit_counts_utf8_bytes() -> None:
    under = "echo " + "é" * ((DEFAULT_MAX_COMMAND_BYTES - 5) // 2)
    over = "echo " + "é" * (DEFAULT_MAX_COMMAND_BYTES // 2)
    assert detect_dangerous_command(under)[1] != "command_too_long"
    assert detect_dangerous_command(over)[1] == "command_too_long"


def test_budget_exhaustion_fails_closed_and_keeps_earlier_hardline() -> None:
    filler = "a;" * 30_000
    hidden = analyze_command(filler + "rm -rf src")
    assert hidden.dangerous is not None
    assert hidden.dangerous.key == "analysis_budget_exhausted"
    early = analyze_command("rm -rf /;" + filler)
    assert early.hardline is not None and early.hardline.key == "delete_root"


def test_budget_is_charged_and_stops_the_walk() -> None:
    analyzer = Analyzer(budget=Budget(commands=5))
    analyzer.analyze("a; b; c; d; e; f; g; rm -rf src")
    assert analyzer.budget.exhausted
    assert "analysis_budget_exhausted" in analyzer.findings
    assert "recursive_delete" not in analyzer.findings
    assert analyzer.commands <= 5
    nested = Analyzer(budget=Budget(scripts=2))
    nested.analyze("bash -c 'bash -c \"bash -c ls\"'")
    assert nested.budget.exhausted


def test_guard_refuses_a_long_command_before_analysis(tmp_path: Path) -> None:
    guard = ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(None))
    with pytest.raises(CommandTooLong) as raised:
        guard.check("x" * (DEFAULT_MAX_COMMAND_BYTES + 1), session_id="s", backend="local")
    assert isinstance(raised.value, ValueError)
    assert raised.value.limit == DEFAULT_MAX_COMMAND_BYTES
    assert "65536-byte limit" in str(raised.value)
    assert guard.check("x" * DEFAULT_MAX_COMMAND_BYTES, session_id="s", backend="local").allowed


def test_size_limit_is_configurable(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("approvals: {max_command_bytes: 2048}\n")
    guard = ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(config))
    with pytest.raises(CommandTooLong):
        guard.check("echo " + "a" * 2048, session_id="s", backend="local")
    assert guard.check("echo " + "a" * 2000, session_id="s", backend="local").allowed


def test_guard_asks_for_approval_when_the_budget_runs_out() -> None:
    guard = ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(None))
    decision = guard.check("a;" * 30_000 + "ls", session_id="s", backend="local")
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "analysis_budget_exhausted"
