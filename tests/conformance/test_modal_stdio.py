"""The Modal session shell's own stdin and stdout streams, against the fake router: a warm
command opens nothing new, and a stream that breaks loses and repeats nothing."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from environments.backends.modal import stdio
from environments.backends.modal.environment import ModalEnvironment
from tests.fakes.modal import FakeModal
from tests.fixtures_modal import modal_config


@pytest.fixture
def env(fake_modal: FakeModal) -> Iterator[ModalEnvironment]:
    made = ModalEnvironment(f"mds-{secrets.token_hex(4)}", modal_config())
    yield made
    made.close()


def shell_exec(fake: FakeModal, env: ModalEnvironment) -> str:
    """The exec id of ``env``'s session shell (the last shell started in its sandbox)."""
    task = fake.get(env.sandbox_id).task_id
    starts = [
        r
        for r in fake.requests_of("TaskExecStart")
        if r.task_id == task and "sbx-shell-pid" in " ".join(r.command_args)
    ]
    return str(starts[-1].exec_id)


def calls(fake: FakeModal, exec_id: str) -> dict[str, int]:
    """How often each stdio RPC was sent for ``exec_id``."""
    counts = {}
    for method in ("TaskExecStdinWrite", "TaskExecStdinStatus", "TaskExecStdioRead"):
        counts[method] = sum(r.exec_id == exec_id for r in fake.requests_of(method))
    counts["TaskExecStdinWriteStream"] = sum(
        r is not None and r.start.exec_id == exec_id
        for r in fake.requests_of("TaskExecStdinWriteStream")
    )
    counts["refused streams"] = fake.requests_of("TaskExecStdinWriteStream").count(None)
    return counts


def test_warm_commands_go_over_the_open_streams(
    fake_modal: FakeModal, env: ModalEnvironment
) -> None:
    assert env.exec("echo first").output == "first\n"
    shell = shell_exec(fake_modal, env)
    before = calls(fake_modal, shell)
    assert before["TaskExecStdinWriteStream"] == 1 and before["TaskExecStdioRead"] == 1
    for i in range(5):
        assert env.exec(f"echo {i}").output == f"{i}\n"
    assert calls(fake_modal, shell) == before
    assert before["TaskExecStdinWrite"] == 0


def test_cut_streams_lose_and_repeat_nothing(fake_modal: FakeModal, env: ModalEnvironment) -> None:
    env.exec("cd /tmp && export KEPT=yes && echo a >> once")
    shell = shell_exec(fake_modal, env)
    before = calls(fake_modal, shell)
    assert fake_modal.cut_streams() >= 2  # this shell's stdin and stdout, at least
    result = env.exec('echo b >> once; echo "$KEPT"; cat once')
    assert (result.exit_code, result.output) == (0, "yes\na\nb\n")
    assert not result.shell_restarted
    after = calls(fake_modal, shell)
    assert after["TaskExecStdinStatus"] > before["TaskExecStdinStatus"]
    assert after["TaskExecStdioRead"] == before["TaskExecStdioRead"] + 1  # resumed, not replayed
    assert env.exec("echo c >> once; cat once").output == "a\nb\nc\n"


def test_input_lost_in_flight_is_sent_again_once(
    fake_modal: FakeModal, env: ModalEnvironment
) -> None:
    env.exec("true")
    shell = shell_exec(fake_modal, env)
    fake_modal.lose_stdin_messages = 1
    try:
        result = env.exec("echo x >> /tmp/runs; wc -l < /tmp/runs")
    finally:
        fake_modal.lose_stdin_messages = 0
    assert (result.exit_code, result.output.strip()) == (0, "1")
    assert calls(fake_modal, shell)["TaskExecStdinWrite"] >= 1  # the SDK's retrying write
    assert env.exec("echo y >> /tmp/runs; cat /tmp/runs").output == "x\ny\n"


def test_a_router_without_streaming_stdin_gets_unary_writes(
    fake_modal: FakeModal, env: ModalEnvironment
) -> None:
    refused_before = calls(fake_modal, "")["refused streams"]
    fake_modal.stdin_streams = False
    try:
        outputs = [env.exec(f"echo {i} >> /tmp/seen; cat /tmp/seen").output for i in range(3)]
        seen = calls(fake_modal, shell_exec(fake_modal, env))
    finally:
        fake_modal.stdin_streams = True
    assert outputs == ["0\n", "0\n1\n", "0\n1\n2\n"]
    assert seen["refused streams"] == refused_before + 1  # asked once, then never again
    assert seen["TaskExecStdinWrite"] >= 3


def test_a_stream_past_its_retain_limit_is_replaced_without_loss(
    fake_modal: FakeModal, env: ModalEnvironment, monkeypatch: Any
) -> None:
    monkeypatch.setattr(stdio, "RETAIN_LIMIT", 64)
    padding = "#" * 80  # every command line alone passes the limit
    lines = [f"echo {i} >> /tmp/seq; cat /tmp/seq  # {padding}" for i in range(4)]
    outputs = [env.exec(line).output for line in lines]
    assert outputs == ["0\n", "0\n1\n", "0\n1\n2\n", "0\n1\n2\n3\n"]
    seen = calls(fake_modal, shell_exec(fake_modal, env))
    # Each command went on a new stream; what came before had been applied: no re-send.
    assert seen["TaskExecStdinStatus"] >= 3 and seen["TaskExecStdinWriteStream"] >= 4
    assert seen["TaskExecStdinWrite"] == 0
