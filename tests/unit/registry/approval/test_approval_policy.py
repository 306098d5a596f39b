"""ApprovalGuard policy tests, run against the memory store and a real Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry.approval import (
    ApprovalAlreadyResolvedError,
    ApprovalExpiredError,
    ApprovalGuard,
    ApprovalNotFoundError,
    ApprovalSessionError,
)

from .fixtures_approval import write_config

DANGEROUS = "rm -rf src"
HARDLINE = "rm -rf /"


# -- basic outcomes -------------------------------------------------------------
def test_benign_allowed(guard_factory: Callable[..., ApprovalGuard]) -> None:
    decision = guard_factory().check("ls -la src/", session_id="s1", backend="local")
    assert decision.outcome == "allow"
    assert decision.approval_id is None
    assert decision.to_tool_result() is None


def test_dangerous_requires_approval(
    guard_factory: Callable[..., ApprovalGuard], clock: Any
) -> None:
    guard = guard_factory()
    decision = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert decision.outcome == "approval_required"
    assert decision.pattern_key == "recursive_delete"
    assert decision.description
    assert decision.approval_id
    assert decision.to_tool_result() == {
        "status": "approval_required",
        "approval_id": decision.approval_id,
        "pattern_key": "recursive_delete",
        "description": decision.description,
    }
    record = guard.get(decision.approval_id)
    assert record is not None
    assert record.session_id == "s1" and record.command == DANGEROUS
    assert record.created_at == clock.now and record.expires_at == clock.now + 300
    assert guard.status(decision.approval_id) == "pending"


def test_same_command_same_session_shares_one_approval(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guard = guard_factory()
    first = guard.check(DANGEROUS, session_id="s1", backend="local")
    second = guard.check(DANGEROUS, session_id="s1", backend="local")
    other_session = guard.check(DANGEROUS, session_id="s2", backend="local")
    other_command = guard.check("rm -rf docs", session_id="s1", backend="local")
    assert first.approval_id == second.approval_id
    assert len({first.approval_id, other_session.approval_id, other_command.approval_id}) == 3


# -- scopes ---------------------------------------------------------------------
def test_approve_once_runs_exactly_once(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    record = guard.approve(pending.approval_id, "once", session_id="s1")
    assert record.status == "approved" and record.scope == "once"
    assert (
        guard.check("rm -rf docs", session_id="s1", backend="local").outcome == "approval_required"
    )
    assert guard.check(DANGEROUS, session_id="s2", backend="local").outcome == "approval_required"
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"
    again = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert again.outcome == "approval_required"
    assert again.approval_id != pending.approval_id


def test_once_grant_expires(guard_factory: Callable[..., ApprovalGuard], clock: Any) -> None:
    guard = guard_factory({"approvals": {"once_ttl": 60}})
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    guard.approve(pending.approval_id, "once", session_id="s1")
    clock.advance(61)
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"


def test_approve_session_covers_pattern_key_in_that_session(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guard = guard_factory()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    guard.approve(pending.approval_id, "session", session_id="s1")
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"
    assert guard.check("rm -r other", session_id="s1", backend="local").outcome == "allow"
    assert guard.check(DANGEROUS, session_id="s2", backend="local").outcome == "approval_required"
    assert (
        guard.check("docker volume rm web", session_id="s1", backend="local").outcome
        == "approval_required"
    )
    guard.clear_session("s1")
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"


def test_session_approval_covers_every_key_of_a_compound_command(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guard = guard_factory()
    command = "docker compose down -v && rm -rf data"
    pending = guard.check(command, session_id="s1", backend="local")
    assert pending.pattern_key == "container_lifecycle"
    assert pending.approval_id is not None
    guard.approve(pending.approval_id, "session", session_id="s1")
    assert guard.check(command, session_id="s1", backend="local").outcome == "allow"
    assert guard.check("rm -rf other", session_id="s1", backend="local").outcome == "allow"


def test_approve_always_allows_that_exact_command_everywhere_and_writes_no_policy(
    guard_factory: Callable[..., ApprovalGuard],
    config_path: Path,
) -> None:
    guard = guard_factory({"command_denylist": ["git push --force*"]})
    before = config_path.read_text()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    guard.approve(pending.approval_id, "always", session_id="s1")
    assert config_path.read_text() == before  # the policy file is the operator's alone
    # Another worker (a fresh guard on the shared store), another session: that exact
    # command runs; the same pattern with another target still asks.
    other = guard_factory()
    assert other.check(DANGEROUS, session_id="s9", backend="docker").outcome == "allow"
    again = other.check("rm -rf anything", session_id="s9", backend="docker")
    assert again.outcome == "approval_required"
    assert guard.check("rm -rf anything", session_id="s1", backend="local").outcome == (
        "approval_required"
    )


def test_deny_then_retry_asks_again(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    record = guard.deny(pending.approval_id, session_id="s1")
    assert record.status == "denied"
    assert guard.status(pending.approval_id) == "denied"
    with pytest.raises(ApprovalAlreadyResolvedError):
        guard.approve(pending.approval_id, "once", session_id="s1")
    retry = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert retry.outcome == "approval_required" and retry.approval_id != pending.approval_id


def test_expired_approval_cannot_be_approved(
    guard_factory: Callable[..., ApprovalGuard], clock: Any
) -> None:
    guard = guard_factory({"approvals": {"timeout": 30}})
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    clock.advance(29)
    assert guard.status(pending.approval_id) == "pending"
    clock.advance(1)
    assert guard.status(pending.approval_id) == "expired"
    with pytest.raises(ApprovalExpiredError):
        guard.approve(pending.approval_id, "session", session_id="s1")
    retry = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert retry.outcome == "approval_required" and retry.approval_id != pending.approval_id
    assert guard.check(DANGEROUS, session_id="s1", backend="local").approval_id == retry.approval_id


def test_approval_errors(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory()
    pending = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert pending.approval_id is not None
    with pytest.raises(ApprovalSessionError):
        guard.approve(pending.approval_id, "once", session_id="intruder")
    with pytest.raises(ApprovalNotFoundError):
        guard.approve("apr_missing", "once", session_id="s1")
    with pytest.raises(ValueError):
        guard.approve(pending.approval_id, "forever", session_id="s1")  # type: ignore[arg-type]
    assert guard.status("apr_missing") == "unknown"
    assert guard.status(pending.approval_id) == "pending"


# -- hardline, deny rules, modes, backends --------------------------------------------
@pytest.mark.parametrize("mode", ["manual", "smart", "off"])
@pytest.mark.parametrize("backend", ["local", "docker", "modal", "daytona", "singularity", "ssh"])
def test_hardline_blocked_everywhere(
    guard_factory: Callable[..., ApprovalGuard], mode: str, backend: str
) -> None:
    guard = guard_factory(
        {
            "command_allowlist": ["delete_root", "rm -rf /", "rm *"],
            "approvals": {"mode": mode, "backend_policy": {backend: "allow"}},
        }
    )
    guard.store.add_session_keys("s1", ["delete_root"])
    decision = guard.check(HARDLINE, session_id="s1", backend=backend)
    assert decision.outcome == "blocked"
    assert decision.pattern_key == "delete_root"
    assert decision.reason and "hardline" in decision.reason
    assert decision.to_tool_result() == {"status": "blocked", "error": decision.reason}


def test_deny_rules_win_over_everything(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory(
        {
            "command_allowlist": ["recursive_delete", "git push*"],
            "command_denylist": ["git push", "recursive_delete"],
            "approvals": {"mode": "off", "backend_policy": {"docker": "allow"}},
        }
    )
    for command in ("git push", "git push origin main", "ls && git push --tags", "rm -rf build"):
        decision = guard.check(command, session_id="s1", backend="docker")
        assert decision.outcome == "blocked", command
        assert decision.reason and "command_denylist" in decision.reason
    assert guard.check("git pull", session_id="s1", backend="docker").outcome == "allow"


def test_mode_off_allows_non_hardline(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory({"approvals": {"mode": "off"}})
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"
    assert guard.check(HARDLINE, session_id="s1", backend="local").outcome == "blocked"


def test_mode_argument_overrides_file(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory({"approvals": {"mode": "off"}}, mode="manual")
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"


@pytest.mark.parametrize("backend", ["docker", "modal", "daytona", "singularity", "vercel_sandbox"])
def test_containers_are_checked_by_default(
    guard_factory: Callable[..., ApprovalGuard], backend: str
) -> None:
    assert (
        guard_factory().check(DANGEROUS, session_id="s1", backend=backend).outcome
        == "approval_required"
    )


def test_backend_relaxation_only_when_configured(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guard = guard_factory(
        {
            "approvals": {
                "backend_policy": {"docker": "allow", "modal": ["recursive_delete"], "ssh": "check"}
            }
        }
    )
    assert guard.check(DANGEROUS, session_id="s1", backend="docker").outcome == "allow"
    assert guard.check(DANGEROUS, session_id="s1", backend="modal").outcome == "allow"
    assert (
        guard.check("docker volume rm x", session_id="s1", backend="modal").outcome
        == "approval_required"
    )
    assert guard.check(DANGEROUS, session_id="s1", backend="ssh").outcome == "approval_required"
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"
    assert guard.check(HARDLINE, session_id="s1", backend="docker").outcome == "blocked"


# -- allowlist entries --------------------------------------------------------------------
def test_allowlist_pattern_key(guard_factory: Callable[..., ApprovalGuard]) -> None:
    guard = guard_factory({"command_allowlist": ["recursive_delete"]})
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"
    assert guard.check(
        "rm -rf src && docker volume rm x", session_id="s1", backend="local"
    ).pattern_key == ("container_lifecycle")


def test_allowlist_text_and_glob_never_match_compound(
    guard_factory: Callable[..., ApprovalGuard],
) -> None:
    guard = guard_factory({"command_allowlist": ["rm -rf src", "rm -rf data*"]})
    assert guard.check("rm -rf src", session_id="s1", backend="local").outcome == "allow"
    assert guard.check("rm  -rf   src", session_id="s1", backend="local").outcome == "allow"
    assert guard.check("rm -rf data/.cache", session_id="s1", backend="local").outcome == "allow"
    assert (
        guard.check("rm -rf docs", session_id="s1", backend="local").outcome == "approval_required"
    )
    for compound in (
        "rm -rf data; curl x | sh",
        "rm -rf data && rm -rf ~/work",
        "rm -rf data $(rm -rf src)",
        "rm -rf src\nrm -rf lib",
    ):
        assert (
            guard.check(compound, session_id="s1", backend="local").outcome == "approval_required"
        ), compound


# -- configuration caching ------------------------------------------------------------------
def test_config_changes_take_effect_on_reload_only(
    guard_factory: Callable[..., ApprovalGuard], config_path: Path
) -> None:
    guard = guard_factory({"approvals": {"mode": "manual"}})
    write_config(config_path, {"approvals": {"mode": "off"}})  # e.g. written by a sandbox
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"
    guard.reload()  # the operator's signal
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"


def test_config_not_reparsed_per_call(
    guard_factory: Callable[..., ApprovalGuard], monkeypatch: pytest.MonkeyPatch
) -> None:
    guard = guard_factory({"approvals": {"mode": "manual"}})
    calls: list[str] = []
    real = yaml.safe_load

    def counting_load(text: str) -> Any:
        calls.append(text)
        return real(text)

    monkeypatch.setattr("registry.approval.config.yaml.safe_load", counting_load)
    for _ in range(50):
        guard.check(DANGEROUS, session_id="s1", backend="local")
        guard.check("ls", session_id="s1", backend="local")
    assert calls == []
    guard.reload()
    assert len(calls) == 1


def test_broken_config_keeps_last_good_rules(
    guard_factory: Callable[..., ApprovalGuard], config_path: Path
) -> None:
    guard = guard_factory({"command_denylist": ["curl*"]})
    config_path.write_text("command_denylist: [unclosed\n")
    assert guard.check("curl https://x", session_id="s1", backend="local").outcome == "blocked"
