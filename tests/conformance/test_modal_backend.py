"""The modal backend on the real SDK against the fake Modal: the whole conformance suite,
the hardened create parameters, re-attach, sandboxes ended behind sbx's back, errors, sweeps."""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from modal_proto import api_pb2

from environments import conformance
from environments.backends.modal import sdk
from environments.backends.modal.environment import ModalEnvironment, availability, reap_orphans
from environments.backends.naming import sandbox_name
from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxDead,
    SandboxNotFound,
    ServiceUnreachable,
)
from tests.fakes.modal import PINNED_SDK, TOKEN_SECRET, FakeModal
from tests.fixtures_backends import Factory
from tests.fixtures_modal import modal_config

BLOCKED = api_pb2.NetworkAccess.NetworkAccessType.BLOCKED
ALLOWLIST = api_pb2.NetworkAccess.NetworkAccessType.ALLOWLIST


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_modal_conformance(modal_factory: Factory, check: str) -> None:
    conformance.CHECKS[check](modal_factory)


@pytest.fixture
def session() -> str:
    return f"md-{secrets.token_hex(4)}"


@pytest.fixture
def envs(fake_modal: FakeModal) -> Iterator[list[ModalEnvironment]]:
    """Environments a test makes; closed afterwards."""
    made: list[ModalEnvironment] = []
    yield made
    for env in made:
        env.close()


def make(envs: list[ModalEnvironment], session: str, **overrides: Any) -> ModalEnvironment:
    sandbox_id = overrides.pop("sandbox_id", None)
    env = ModalEnvironment(session, modal_config(**overrides), sandbox_id=sandbox_id)
    envs.append(env)
    return env


def last_create(fake: FakeModal) -> Any:
    return fake.requests_of("SandboxCreateV2")[-1]


def test_sdk_is_the_pinned_version_and_the_fake_covers_its_protocol() -> None:
    """Fails loudly when the installed SDK is not the one the fake was written against."""
    from modal_proto import api_grpc, task_command_router_grpc

    from tests.fakes.modal.control import ControlPlane
    from tests.fakes.modal.router import Router

    assert sdk.PINNED_MINOR == PINNED_SDK
    assert sdk.sdk_version().startswith(PINNED_SDK + "."), (
        f"modal {sdk.sdk_version()} is installed; the fake Modal and the adapter were written "
        f"against {PINNED_SDK}.x: check the RPCs the SDK sends, then update both and the pin"
    )
    for fake_class, base in (
        (ControlPlane, api_grpc.ModalClientBase),
        (Router, task_command_router_grpc.TaskCommandRouterBase),
    ):
        implemented = {n for n in vars(fake_class) if n[:1].isupper()}
        assert implemented <= set(vars(base)), implemented - set(vars(base))


def test_sandbox_is_created_with_the_hardened_settings(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    env = make(envs, session, env={"GREETING": "hello"})
    assert env.exec("echo $GREETING; pwd").output == "hello\n/workspace\n"
    create = last_create(fake_modal)
    definition = create.definition
    assert definition.network_access.network_access_type == BLOCKED
    assert (definition.resources.milli_cpu, definition.resources.milli_cpu_max) == (1000, 1000)
    assert (definition.resources.memory_mb, definition.resources.memory_mb_max) == (2048, 2048)
    assert (definition.timeout_secs, definition.idle_timeout_secs) == (3600, 900)
    assert definition.workdir == "/workspace"
    assert definition.name == sandbox_name(session, env.config.fingerprint()) == env.name
    tags = {t.tag_name: t.tag_value for t in create.tags}
    assert tags["sbx"] == "1" and tags["sbx.session"] == session
    assert tags["sbx.config"] == env.config.fingerprint()
    assert ":" in tags["sbx.worker"] and tags["sbx.active"].isdigit()
    assert [dict(s.env.contents) for s in create.secret_sources] == [{"GREETING": "hello"}]
    app = fake_modal.requests_of("AppGetOrCreate")[-1]
    assert app.app_name == "sbx-tests"
    assert app.object_creation_type == api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING
    image = fake_modal.requests_of("ImageGetOrCreate")[-1].image
    assert "FROM debian:bookworm-slim" in image.dockerfile_commands
    # Inside: only loopback, and none of the worker's Modal credentials.
    assert env.exec("tail -n +3 /proc/net/dev | cut -d: -f1").output.split() == ["lo"]
    assert "MODAL_TOKEN" not in env.exec("env").output


def test_outbound_allowlist_replaces_the_blocked_network(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    env = make(envs, session, outbound_cidr_allowlist=("10.0.0.0/8",), cpu=0.5, memory=512)
    env.exec("true")
    definition = last_create(fake_modal).definition
    assert definition.network_access.network_access_type == ALLOWLIST
    assert list(definition.network_access.allowed_cidrs) == ["10.0.0.0/8"]
    assert (definition.resources.milli_cpu_max, definition.resources.memory_mb_max) == (500, 512)


def test_named_image(fake_modal: FakeModal, envs: list[ModalEnvironment], session: str) -> None:
    fake_modal.named_images["sbx-base:latest"] = "im-published0001"
    env = make(envs, session, image_name="sbx-base")
    env.exec("true")
    assert last_create(fake_modal).definition.image_id == "im-published0001"
    missing = make(envs, session + "-m", image_name="sbx-never-published")
    with pytest.raises(SandboxNotFound, match="not found") as caught:
        missing.exec("true")
    assert "\n" not in str(caught.value)
    assert fake_modal.sandboxes_of_session(session + "-m") == []


def test_a_new_worker_reattaches_by_name_and_by_id(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    first = make(envs, session)
    first.exec("echo kept > /workspace/file")
    creates = len(fake_modal.requests_of("SandboxCreateV2"))
    # A restarted worker: new object, nothing shared but the session id and settings.
    second = make(envs, session)
    assert second.exec("cat /workspace/file").output == "kept\n"
    assert second.sandbox_id == first.sandbox_id
    # Given the recorded sandbox id, it attaches through Sandbox.from_id.
    third = make(envs, session, sandbox_id=first.sandbox_id)
    assert third.exec("cat /workspace/file").output == "kept\n"
    assert any(r.sandbox_id == first.sandbox_id for r in fake_modal.requests_of("SandboxWaitV2"))
    assert len(fake_modal.requests_of("SandboxCreateV2")) == creates
    assert len(fake_modal.sandboxes_of_session(session)) == 1


def test_sandbox_ended_behind_our_back_is_replaced_and_the_call_says_so(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    env = make(envs, session)
    env.exec("cd /tmp && export KEPT=yes")
    old = env.sandbox_id
    fake_modal.terminate_behind_the_back(old)
    result = env.exec('echo "back $KEPT in $PWD"')
    assert result.exit_code == 0 and result.shell_restarted
    assert "sandbox had ended" in result.output
    assert result.output.endswith("back yes in /tmp\n")
    assert env.sandbox_id != old
    assert env.exec("echo again").output == "again\n"
    # A restarted worker meeting the ended sandbox says so too.
    fake_modal.terminate_behind_the_back(env.sandbox_id)
    later = make(envs, session).exec("echo fresh")
    assert later.shell_restarted and later.output.endswith("fresh\n")
    assert "sandbox had ended" in later.output


def test_close_terminates_the_sandbox(fake_modal: FakeModal, session: str) -> None:
    env = ModalEnvironment(session, modal_config())
    env.exec("true")
    sandbox = fake_modal.sandboxes[env.sandbox_id]
    env.close()
    env.close()
    assert not sandbox.running
    assert fake_modal.sandboxes_of_session(session) == []


def test_touch_refreshes_the_activity_tag(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    env = make(envs, session)
    env.exec("true")
    sandbox = fake_modal.sandboxes[env.sandbox_id]
    sandbox.tags["sbx.active"] = "0"
    env.touch()
    assert int(sandbox.tags["sbx.active"]) > 0 and sandbox.tags["sbx.session"] == session


def test_orphan_sweep_by_tags_honours_keep(fake_modal: FakeModal, session: str) -> None:
    config = modal_config(app_name=f"sweep-{session}")
    kept, idle = ModalEnvironment(session + "-kept", config), ModalEnvironment(session, config)
    # Another deployment's (its own App): idle as long, never ours to sweep.
    stranger = ModalEnvironment(session, modal_config(app_name=f"other-{session}"))
    try:
        for env in (kept, idle, stranger):
            env.exec("true")
        claimed = {session + "-kept"}.__contains__
        assert reap_orphans(config, 3600, claimed) == []  # both were just used
        removed = reap_orphans(config, 3600, claimed, now=time.time() + 7200)
        assert removed == [idle.sandbox_id]
        assert not fake_modal.sandboxes[idle.sandbox_id].running
        assert fake_modal.sandboxes[kept.sandbox_id].running
        assert fake_modal.sandboxes[stranger.sandbox_id].running
    finally:
        for env in (kept, idle, stranger):
            env.close()


def test_missing_credentials_are_one_clear_error(
    fake_modal: FakeModal, monkeypatch: pytest.MonkeyPatch, session: str
) -> None:
    # Empty variables win over a profile in ~/.modal.toml, as unset ones would not.
    monkeypatch.setenv("MODAL_TOKEN_ID", "")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "")
    env = ModalEnvironment(session, modal_config())
    with pytest.raises(CredentialsMissing, match="MODAL_TOKEN_ID") as caught:
        env.exec("true")
    assert "\n" not in str(caught.value)
    ok, reason = availability(modal_config())
    assert not ok and reason.startswith("Modal credentials missing")
    env.close()


def test_rejected_credentials_never_show_the_secret(fake_modal: FakeModal, session: str) -> None:
    secret = "as-wrong-" + secrets.token_hex(8)
    config = modal_config(token_id="ak-sbx-fake-token-id", token_secret=secret)
    assert secret not in repr(config) and secret not in str(config.public_view())
    env = ModalEnvironment(session, config)
    with pytest.raises(AuthenticationFailed) as caught:
        env.exec("true")
    message = str(caught.value)
    assert "\n" not in message and secret not in message and TOKEN_SECRET not in message
    ok, reason = availability(config)
    assert not ok and "rejected the credentials" in reason and secret not in reason
    assert fake_modal.sandboxes_of_session(session) == []


def test_quota_error_creates_nothing(fake_modal: FakeModal, session: str) -> None:
    fake_modal.quota_exceeded = True
    try:
        env = ModalEnvironment(session, modal_config())
        with pytest.raises(QuotaExceeded, match="quota") as caught:
            env.exec("true")
        assert "\n" not in str(caught.value)
    finally:
        fake_modal.quota_exceeded = False
    assert fake_modal.sandboxes_of_session(session) == []


def test_lost_create_reply_leaves_nothing_running(fake_modal: FakeModal, session: str) -> None:
    fake_modal.create_hangs = True
    try:
        env = ModalEnvironment(session, modal_config(api_timeout=3))
        with pytest.raises(ServiceUnreachable, match="did not answer in time"):
            env.exec("true")
    finally:
        fake_modal.create_hangs = False
    assert fake_modal.sandboxes_of_session(session) == []


@pytest.mark.timeout(60)
def test_unreachable_api_is_a_clear_error_within_the_deadline(
    fake_modal: FakeModal, monkeypatch: pytest.MonkeyPatch, session: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{port}")
    env = ModalEnvironment(session, modal_config())
    with pytest.raises(ServiceUnreachable, match=f"127.0.0.1:{port} unreachable"):
        env.exec("true")
    ok, reason = availability(modal_config())
    assert not ok and "unreachable" in reason
    # A server that accepts connections but never answers: the call's deadline ends it.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("MODAL_SERVER_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        env = ModalEnvironment(session, modal_config(api_timeout=2, connect_timeout=2))
        with pytest.raises(ServiceUnreachable):
            env.exec("true")


def test_available_against_the_fake(fake_modal: FakeModal) -> None:
    ok, reason = availability(modal_config())
    assert ok and fake_modal.server_url.removeprefix("http://") in reason


def test_a_file_larger_than_the_sdks_stdin_buffer_is_written_whole(
    envs: list[ModalEnvironment], session: str
) -> None:
    """The SDK refuses more than 16 MiB between drains; uploads may be up to 64 MiB."""
    from modal.io_streams import TASK_COMMAND_ROUTER_MAX_BUFFER_SIZE

    env = make(envs, session)
    data = bytes(range(256)) * (TASK_COMMAND_ROUTER_MAX_BUFFER_SIZE // 256 + 1) + b"end"
    env.write_file("/tmp/big.bin", data)
    assert env.exec("wc -c < /tmp/big.bin; tail -c 3 /tmp/big.bin").output == f"{len(data)}\nend"
    assert env.read_file("/tmp/big.bin") == data


def test_a_file_call_on_an_ended_sandbox_is_one_clear_error_and_the_next_call_works(
    fake_modal: FakeModal, envs: list[ModalEnvironment], session: str
) -> None:
    env = make(envs, session)
    env.exec("echo old > /tmp/f")
    old = env.sandbox_id
    fake_modal.terminate_behind_the_back(old)
    with pytest.raises(SandboxDead, match="has ended") as caught:
        env.read_file("/tmp/f")
    assert "\n" not in str(caught.value)
    env.write_file("/tmp/g", b"new")
    assert env.read_file("/tmp/g") == b"new" and env.sandbox_id != old
    result = env.exec("cat /tmp/g")
    assert result.shell_restarted and result.output.endswith("new"), result
    assert "sandbox had ended" in result.output
