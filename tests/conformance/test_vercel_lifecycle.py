"""vercel_sandbox lifecycle over the fake Vercel API: reconnect, resume, recreate, close,
time limits, the orphan sweep, and the errors of credentials, quota and an unreachable API."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import SecretStr

from tests.fixtures_vercel import vercel_config
from tests.helpers import free_port, require_module

require_module("vercel.sandbox", "pip install 'sbx[vercel]'")

from environments.backends.vercel import VercelEnvironment, reap_orphans  # noqa: E402
from environments.backends.vercel.environment import (  # noqa: E402
    RESUMED_NOTE,
    VANISHED_NOTE,
)
from environments.errors import (  # noqa: E402
    AuthenticationFailed,
    BackendUnavailable,
    CredentialsMissing,
    QuotaExceeded,
    SandboxDead,
    ServiceUnreachable,
)


def test_a_restarted_worker_finds_the_session_sandbox(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel)
    first = VercelEnvironment("vc-reattach", config)
    assert first.exec("echo kept > /vercel/sandbox/f; echo ok").output == "ok\n"
    # The worker dies: its Environment object is never closed. A new one attaches.
    second = VercelEnvironment("vc-reattach", config)
    try:
        result = second.exec("cat /vercel/sandbox/f")
        assert (result.output, result.shell_restarted) == ("kept\n", False)
        assert len(fake_vercel.requests_to("POST", "/v3/sandboxes")) == 1
        assert second.sandbox_id == first.sandbox_id
    finally:
        second.close()
    assert fake_vercel.service.sandboxes == {}


def test_a_stopped_sandbox_is_resumed_and_the_call_says_so(fake_vercel: Any) -> None:
    env = VercelEnvironment("vc-resume", vercel_config(fake_vercel, persistent=True))
    try:
        assert env.exec("cd /tmp && echo data > kept && export MARK=1").exit_code == 0
        fake_vercel.stop_behind_back(env.sandbox_id)
        result = env.exec('cat /tmp/kept; echo "mark=$MARK"; pwd')
        assert result.shell_restarted
        assert result.output == RESUMED_NOTE + "data\nmark=1\n/tmp\n"
        assert env.exec("echo again").output == "again\n"
    finally:
        env.close()


def test_a_sandbox_stopped_by_its_time_limit_is_resumed(fake_vercel: Any) -> None:
    env = VercelEnvironment(
        "vc-expire", vercel_config(fake_vercel, execution_time_limit=2, extend_margin=0)
    )
    try:
        assert env.exec("echo one").output == "one\n"
        session = fake_vercel.service.sandboxes[env.sandbox_id].session
        deadline = time.monotonic() + 30
        while session.status == "running":  # the fake's time limit, not a sleep of ours
            assert time.monotonic() < deadline, "the fake never enforced the time limit"
            time.sleep(0.05)
        result = env.exec("echo two")
        assert result.shell_restarted and result.output == RESUMED_NOTE + "two\n"
    finally:
        env.close()


def test_a_destroyed_sandbox_is_recreated_and_the_call_says_so(fake_vercel: Any) -> None:
    env = VercelEnvironment("vc-recreate", vercel_config(fake_vercel))
    try:
        env.exec("touch /vercel/sandbox/old")
        fake_vercel.destroy_behind_back(env.sandbox_id)
        result = env.exec("ls /vercel/sandbox; echo fresh")
        assert result.shell_restarted and result.output == VANISHED_NOTE + "fresh\n"
        assert len(fake_vercel.requests_to("POST", "/v3/sandboxes")) == 2
    finally:
        env.close()


def test_a_file_call_on_a_destroyed_sandbox_is_one_clear_error_and_the_next_call_works(
    fake_vercel: Any,
) -> None:
    env = VercelEnvironment("vc-files-gone", vercel_config(fake_vercel))
    try:
        env.exec("echo old > /tmp/f")
        fake_vercel.destroy_behind_back(env.sandbox_id)
        with pytest.raises(SandboxDead, match="is gone") as caught:
            env.read_file("/tmp/f")
        assert "\n" not in str(caught.value)
        env.write_file("/tmp/g", b"new")
        assert env.read_file("/tmp/g") == b"new"
        result = env.exec("cat /tmp/g")
        assert result.shell_restarted and result.output == VANISHED_NOTE + "new", result
    finally:
        env.close()


def test_touch_extends_the_time_limit_only_near_its_end(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel, execution_time_limit=120, extend_margin=60, extend_by=300)
    env = VercelEnvironment("vc-touch", config)
    try:
        env.exec("true")
        env.touch()
        assert fake_vercel.requests_to("POST", "/extend-timeout") == []
        near = VercelEnvironment("vc-touch", config.model_copy(update={"extend_margin": 600}))
        near.exec("true")  # attaches
        near.exec("true")  # every call touches: this one is within the margin
        (extend,) = fake_vercel.requests_to("POST", "/extend-timeout")
        assert extend["body"] == {"duration": 300_000}
        session = fake_vercel.service.sandboxes[env.sandbox_id].session
        assert session.timeout_ms == 420_000
    finally:
        env.close()


@pytest.mark.parametrize("on_close", ["destroy", "stop", "keep"])
def test_close_does_what_on_close_says(fake_vercel: Any, on_close: str) -> None:
    env = VercelEnvironment(f"vc-close-{on_close}", vercel_config(fake_vercel, on_close=on_close))
    env.exec("true")
    env.close()
    env.close()
    sandboxes = fake_vercel.service.sandboxes
    if on_close == "destroy":
        assert env.sandbox_id not in sandboxes
    else:
        status = sandboxes[env.sandbox_id].session.status
        assert status == ("stopped" if on_close == "stop" else "running")
    unused = VercelEnvironment(f"vc-unused-{on_close}", vercel_config(fake_vercel))
    unused.close()
    assert unused.sandbox_id not in sandboxes


def test_orphan_sweep_by_tags_honours_keep(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel, on_close="keep")
    for session in ("vc-orphan-a", "vc-orphan-b", "vc-orphan-kept"):
        env = VercelEnvironment(session, config)
        env.exec("true")
        env.close()
    other = vercel_config(fake_vercel, name_prefix="other")
    stranger = VercelEnvironment("not-ours", other)
    stranger.exec("true")
    try:
        assert reap_orphans(config, 3600, lambda sid: False) == []  # none idle that long
        removed = reap_orphans(config, -1, lambda sid: sid == "vc-orphan-kept")
        names = {VercelEnvironment(s, config).sandbox_id for s in ("vc-orphan-a", "vc-orphan-b")}
        assert set(removed) == names
        left = set(fake_vercel.service.sandboxes)
        assert left == {VercelEnvironment("vc-orphan-kept", config).sandbox_id, stranger.sandbox_id}
    finally:
        stranger.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text
    from tests.fakes.vercel import TOKEN

    assert TOKEN not in text
    return text


def test_rejected_credentials_are_one_clear_line(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel, token=SecretStr("wrong-token-value"))
    env = VercelEnvironment("vc-badauth", config)
    with pytest.raises(AuthenticationFailed) as caught:
        env.exec("true")
    text = _one_line(caught.value)
    assert "rejected the credentials" in text and "wrong-token-value" not in text
    assert isinstance(caught.value, PermissionError)


def test_missing_credentials_say_what_to_set(
    fake_vercel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("VERCEL_OIDC_TOKEN", "VERCEL_TOKEN", "VERCEL_TEAM_ID", "VERCEL_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    config = vercel_config(fake_vercel, token=None, read_vercel_env=True)
    with pytest.raises(CredentialsMissing) as caught:
        VercelEnvironment("vc-nocreds", config).exec("true")
    assert "VERCEL_TOKEN" in _one_line(caught.value)
    ok, reason = VercelEnvironment.availability()
    assert not ok and "VERCEL_OIDC_TOKEN" in reason


def test_credentials_from_the_sdk_variables(
    fake_vercel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.vercel import PROJECT_ID, TEAM_ID, TOKEN

    monkeypatch.delenv("VERCEL_OIDC_TOKEN", raising=False)
    monkeypatch.setenv("VERCEL_TOKEN", TOKEN)
    monkeypatch.setenv("VERCEL_TEAM_ID", TEAM_ID)
    monkeypatch.setenv("VERCEL_PROJECT_ID", PROJECT_ID)
    config = vercel_config(
        fake_vercel, token=None, team_id=None, project_id=None, read_vercel_env=True
    )
    env = VercelEnvironment("vc-envcreds", config)
    try:
        assert env.exec("echo via-env").output == "via-env\n"
    finally:
        env.close()


def test_quota_refusal_is_one_line_and_leaves_nothing(fake_vercel: Any) -> None:
    fake_vercel.service.max_sandboxes = 0
    env = VercelEnvironment("vc-quota", vercel_config(fake_vercel))
    with pytest.raises(QuotaExceeded) as caught:
        env.exec("true")
    assert "quota" in _one_line(caught.value)
    assert fake_vercel.service.sandboxes == {}


def test_unreachable_api_is_a_clear_error_within_the_deadline(fake_vercel: Any) -> None:
    config = vercel_config(
        fake_vercel,
        base_url=f"http://127.0.0.1:{free_port()}",
        connect_timeout=2,
        request_timeout=5,
    )
    env = VercelEnvironment("vc-down", config)
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable) as caught:
        env.exec("true", timeout=30)
    assert time.monotonic() - started < 30
    assert "unreachable" in _one_line(caught.value)
    assert isinstance(caught.value, BackendUnavailable | ConnectionError)


def test_a_sandbox_created_by_a_racing_worker_is_used_not_destroyed(
    fake_vercel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = vercel_config(fake_vercel)
    other = VercelEnvironment("vc-race", config)
    other.exec("echo theirs > /vercel/sandbox/mark")
    mine = VercelEnvironment("vc-race", config)
    real_find = mine.api.find
    misses = [True]  # the first lookup misses: the other worker creates it just after

    def find(name: str) -> Any:
        return None if misses and misses.pop() else real_find(name)

    monkeypatch.setattr(mine.api, "find", find)
    try:
        assert mine.exec("cat /vercel/sandbox/mark").output == "theirs\n"
        assert len(fake_vercel.requests_to("POST", "/v3/sandboxes")) == 2  # ours got a 409
        assert fake_vercel.requests_to("DELETE", mine.sandbox_id) == []
    finally:
        mine.close()


@pytest.mark.parametrize("service_ends_it", [True, False], ids=["ended", "stalled"])
def test_a_helper_command_that_does_not_answer_is_given_up(
    fake_vercel: Any, service_ends_it: bool
) -> None:
    # A helper blocked in the sandbox (here opening a FIFO nobody writes, as a file
    # swapped for one after the helper checked it would) is ended by the service at the
    # deadline; when the service does not end it (its stream stalls), the worker stops
    # waiting a little later. Either way: a clear error, and the session carries on.
    fake_vercel.service.honour_timeouts = service_ends_it
    env = VercelEnvironment("vc-stuck-helper", vercel_config(fake_vercel))
    try:
        assert env.exec("mkfifo /tmp/stuck && echo made").output == "made\n"
        env.helper_deadline = 1.0
        why = "the service ended it" if service_ends_it else "nor did the service"
        with pytest.raises(ServiceUnreachable, match=f"did not answer within 1 s \\({why}\\)"):
            env._helper("cat /tmp/stuck", [])
        env.helper_deadline = VercelEnvironment.helper_deadline
        assert env._helper("echo answered", []) == (0, b"answered\n")
        # Ended with its group by the service; else left to itself (sbx cannot end it).
        blocked = env.exec("ps -eo args | grep -c '[c]at /tmp/stuck'").output
        assert (blocked == "0\n") is service_ends_it, blocked
    finally:
        env.close()
