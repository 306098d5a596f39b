"""Smart mode against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from registry.approval import ApprovalConfigSource, ApprovalGuard, JudgeClient, MemoryApprovalStore
from registry.approval.smart import parse_verdict

DANGEROUS = "rm -rf src"


def test_judge_verdicts(judge_server: Any) -> None:
    client = JudgeClient(judge_server.url, api_key="sk-test-secret", model="judge-1", timeout=5)
    for mode, expected in [
        ("approve", "approve"),
        ("deny", "deny"),
        ("garbage", "escalate"),
        ("lower", "approve"),
        ("http500", "escalate"),
        ("badjson", "escalate"),
    ]:
        judge_server.mode = mode
        assert client.judge(DANGEROUS, "recursive_delete", "recursive delete") == expected, mode
    request = judge_server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "judge-1"
    assert DANGEROUS in request["body"]["messages"][-1]["content"]
    assert judge_server.headers[0]["Authorization"] == "Bearer sk-test-secret"


def test_judge_timeout_escalates(judge_server: Any) -> None:
    judge_server.mode = "slow"
    client = JudgeClient(judge_server.url, timeout=0.2)
    assert client.judge(DANGEROUS, "recursive_delete", "recursive delete") == "escalate"


def test_judge_unreachable_escalates(closed_port: int) -> None:
    client = JudgeClient(f"http://127.0.0.1:{closed_port}/v1", timeout=2)
    assert client.judge(DANGEROUS, "recursive_delete", "recursive delete") == "escalate"


def test_judge_does_not_follow_redirects(judge_server: Any) -> None:
    judge_server.mode = "redirect"
    client = JudgeClient(judge_server.url, api_key="sk-secret", timeout=5)
    assert client.judge(DANGEROUS, "recursive_delete", "recursive delete") == "escalate"
    assert [r["path"] for r in judge_server.requests] == ["/v1/chat/completions"]


def test_api_key_never_logged_or_shown(judge_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = JudgeClient(judge_server.url, api_key="sk-very-secret", timeout=5)
    for mode in ("http500", "badjson", "redirect"):
        judge_server.mode = mode
        client.judge(DANGEROUS, "recursive_delete", "recursive delete")
    assert caplog.records  # the failures were logged...
    assert "sk-very-secret" not in caplog.text  # ...without the key
    assert "sk-very-secret" not in repr(client)


def test_rejects_non_http_url() -> None:
    with pytest.raises(ValueError):
        JudgeClient("file:///etc/passwd")


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("APPROVE", "approve"),
        ("approve.", "approve"),
        ("**APPROVE**", "approve"),
        ("DENY", "deny"),
        ("deny: no", "deny"),
        ("I APPROVE", "escalate"),
        ("", "escalate"),
        (None, "escalate"),
        (42, "escalate"),
    ],
)
def test_parse_verdict(text: Any, verdict: str) -> None:
    assert parse_verdict(text) == verdict


def _smart_guard(tmp_path: Path, judge_server: Any, clock: Any) -> ApprovalGuard:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "approvals": {
                    "mode": "smart",
                    "judge": {
                        "url": judge_server.url,
                        "api_key_env": "SBX_TEST_JUDGE_KEY",
                        "timeout": 0.5,
                    },
                },
            }
        )
    )
    return ApprovalGuard(
        store=MemoryApprovalStore(), config=ApprovalConfigSource(path), clock=clock
    )


def test_smart_mode_decisions(
    tmp_path: Path, judge_server: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBX_TEST_JUDGE_KEY", "sk-env-key")
    guard = _smart_guard(tmp_path, judge_server, clock)
    judge_server.mode = "approve"
    decision = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert decision.outcome == "allow" and decision.reason == "approved by judge"
    assert judge_server.headers[-1]["Authorization"] == "Bearer sk-env-key"
    judge_server.mode = "deny"
    decision = guard.check(DANGEROUS, session_id="s1", backend="local")
    assert decision.outcome == "blocked" and decision.reason and "judge" in decision.reason
    for mode in ("garbage", "http500", "slow"):
        judge_server.mode = mode
        decision = guard.check(DANGEROUS, session_id="s1", backend="local")
        assert decision.outcome == "approval_required", mode
        assert decision.approval_id


def test_smart_approve_is_for_this_run_only(tmp_path: Path, judge_server: Any, clock: Any) -> None:
    guard = _smart_guard(tmp_path, judge_server, clock)
    judge_server.mode = "approve"
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "allow"
    judge_server.mode = "garbage"
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"


def test_judge_not_consulted_for_benign_or_hardline(
    tmp_path: Path, judge_server: Any, clock: Any
) -> None:
    guard = _smart_guard(tmp_path, judge_server, clock)
    judge_server.mode = "approve"
    assert guard.check("ls -la", session_id="s1", backend="local").outcome == "allow"
    assert guard.check("rm -rf /", session_id="s1", backend="local").outcome == "blocked"
    assert judge_server.requests == []


def test_smart_without_judge_escalates(tmp_path: Path, clock: Any) -> None:
    guard = ApprovalGuard(
        store=MemoryApprovalStore(), config=ApprovalConfigSource(None), mode="smart", clock=clock
    )
    assert guard.check(DANGEROUS, session_id="s1", backend="local").outcome == "approval_required"
