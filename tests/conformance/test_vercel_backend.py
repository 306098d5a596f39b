"""vercel_sandbox over the fake Vercel API: the whole conformance suite, what a sandbox is
created with, the stream encoders, the pinned SDK, and a live run when credentials exist."""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

import pytest

from environments import conformance
from tests.fixtures_backends import KILL_GRACE, Factory
from tests.fixtures_vercel import vercel_config
from tests.helpers import require_module

require_module("vercel.sandbox", "pip install 'sbx[vercel]'")

from environments.backends.vercel import VercelConfig, VercelEnvironment, sandbox_name  # noqa: E402
from environments.backends.vercel.sdk import SDK_VERSION  # noqa: E402


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_vercel_conformance(vercel_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](vercel_factory)


def test_installed_sdk_is_the_pinned_one() -> None:
    """The adapter and the fake follow this exact SDK: another version must be re-checked."""
    installed = importlib.metadata.version("vercel-sandbox")
    assert installed == SDK_VERSION, (
        f"vercel-sandbox {installed} is installed, the backend was written against "
        f"{SDK_VERSION}: re-read the SDK, update tests/fakes/vercel and the pin"
    )


def _creates(fake: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests_to("POST", "/v3/sandboxes")]


def test_sandbox_is_created_with_safe_defaults(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel, vcpus=4, memory_mb=8192, env={"APP_MODE": "test"})
    env = VercelEnvironment("vc-create", config)
    try:
        assert env.exec("echo hi").output == "hi\n"
        (body,) = _creates(fake_vercel)
        assert body["name"] == sandbox_name("vc-create", config) == env.sandbox_id
        assert body["networkPolicy"] == {"mode": "deny-all"}
        assert body["resources"] == {"vcpus": 4, "memory": 8192}
        assert body["timeout"] == int(config.execution_time_limit * 1000)
        assert body["persistent"] is False
        assert body["env"] == {"APP_MODE": "test"}
        tags = body["tags"]
        assert tags["sbx"] == "1" and tags["sbx-session"] == "vc-create"
        assert ":" in tags["sbx-worker"]
        # The policy is real in the fake: no interface but loopback.
        assert env.exec("tail -n +3 /proc/net/dev | cut -d: -f1").output.split() == ["lo"]
        assert env.exec('echo "$APP_MODE"').output == "test\n"
    finally:
        env.close()
    assert fake_vercel.requests_to("DELETE", "/v2/sandboxes/" + env.sandbox_id)


def test_allowlist_becomes_a_custom_policy(fake_vercel: Any) -> None:
    config = vercel_config(fake_vercel, network_allow=("pypi.org", "files.pythonhosted.org"))
    env = VercelEnvironment("vc-allow", config)
    try:
        env.exec("true")
        (body,) = _creates(fake_vercel)
        assert body["networkPolicy"] == {"allow": {"pypi.org": [], "files.pythonhosted.org": []}}
    finally:
        env.close()


def test_credentials_never_reach_the_sandbox_or_the_wire_log(fake_vercel: Any) -> None:
    from tests.fakes.vercel import TOKEN

    env = VercelEnvironment("vc-secret", vercel_config(fake_vercel))
    try:
        out = env.exec("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'").output
        assert TOKEN not in out and "VERCEL" not in out
    finally:
        env.close()
    for request in fake_vercel.requests:
        assert TOKEN not in repr(request["body"]) and TOKEN not in repr(request["query"])
    assert TOKEN not in repr(env.config) and TOKEN not in str(env.config.model_dump())


def test_no_agent_telemetry_in_requests(fake_vercel: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERCEL_TELEMETRY_DISABLED", raising=False)
    monkeypatch.setenv("AI_AGENT", "sbx-test-agent")
    env = VercelEnvironment("vc-ua", vercel_config(fake_vercel))
    try:
        env.exec("true")
    finally:
        env.close()
    agents = {r["user_agent"] for r in fake_vercel.requests}
    assert agents and not any("agent/" in ua for ua in agents), agents


@pytest.mark.parametrize("encoder", ["python3", "node"])
def test_each_stream_encoder_is_byte_exact(fake_vercel: Any, encoder: str) -> None:
    import shutil

    if shutil.which(encoder) is None:
        pytest.skip(f"{encoder} not installed here")
    config = vercel_config(fake_vercel, stream_encoder=encoder)
    conformance.check_binary_output(lambda sid: VercelEnvironment(sid, config))
    env = VercelEnvironment(f"vc-{encoder}", config)
    try:
        assert env.exec("head -c 300000 /dev/zero | tr '\\0' x | wc -c").output.strip() == "300000"
    finally:
        env.close()


def test_plain_stream_without_an_encoder(fake_vercel: Any) -> None:
    """No python3/node in the image: text arrives exactly, invalid bytes as U+FFFD."""
    env = VercelEnvironment("vc-plain", vercel_config(fake_vercel, stream_encoder="none"))
    try:
        assert env.exec("echo hello; printf 'caf\\303\\251'").output == "hello\ncafé"
        assert env.exec(r"printf 'a\377b'").output == "a\ufffdb"
        assert env.exec("cd /tmp && export X=1").cwd == "/tmp"
        assert env.exec('echo "$X $PWD"').output == "1 /tmp\n"
    finally:
        env.close()


@pytest.mark.skipif(
    os.environ.get("SBX_LIVE_VERCEL") != "1", reason="live Vercel run: set SBX_LIVE_VERCEL=1"
)
@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_live_vercel_conformance(check: str) -> None:
    """The suite against the real service (never in CI): VERCEL_* credentials from the env."""
    if os.environ.get("CI"):
        pytest.skip("live cloud runs never happen in CI")
    config = VercelConfig(kill_grace=KILL_GRACE, execution_time_limit=600)
    made: list[VercelEnvironment] = []

    def make(session_id: str) -> VercelEnvironment:
        env = VercelEnvironment(f"live-{session_id}", config)
        made.append(env)
        return env

    try:
        conformance.CHECKS[check](make)
    finally:
        for env in made:
            env.close()
