"""pty processes on the remote backends (modal, vercel and daytona on their real SDKs
against the fakes, ssh to a real sshd, docker on a real engine): the relay runs in the
sandbox with its python3, so the command has a terminal, takes typed input, outlives
the environment that started it and records its status; a foreground ``pty: true``
runs there too; an image without python3 gets one clear refusal and nothing runs."""

from __future__ import annotations

import secrets

import pytest

from environments.base import Environment, SpawnedProcess
from environments.errors import Unsupported
from environments.pty_exec import run_on_pty
from environments.pty_relay import InputUnavailable
from tests.fixtures_backends import Factory
from tests.helpers import wait_until

# Reads one typed line, says what it got and whether its stdin is a terminal.
ASKS = "printf 'name? '; read x; echo \"got $x\"; [ -t 0 ] && echo on-a-tty; exit 3"


WITH_PYTHON = ["modal", "vercel", "daytona", "ssh", "docker_python"]


@pytest.fixture(params=WITH_PYTHON)
def backend_factory(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_factory")
    return factory


@pytest.fixture(params=[*WITH_PYTHON, "docker"])
def any_factory(request: pytest.FixtureRequest) -> Factory:
    """Also the busybox image, which has no python3."""
    factory: Factory = request.getfixturevalue(f"{request.param}_factory")
    return factory


def session() -> str:
    return f"mp-{secrets.token_hex(4)}"


def spawn(env: Environment, command: str) -> SpawnedProcess:
    base = f"/tmp/sbx-pty-{secrets.token_hex(4)}"
    return env.spawn_on_pty(command, output_path=base + ".out", status_path=base + ".status")


def ended(env: Environment, process: SpawnedProcess) -> bytes:
    wait_until(lambda: not env.is_running(process), 60, "the pty process to end")
    return env.read_file(process.output_path)


def test_a_pty_process_takes_typed_input_and_records_its_status(
    backend_factory: Factory,
) -> None:
    env = backend_factory(session())
    process = spawn(env, ASKS)
    assert env.write_input(process, b"hello\n") == 6
    output = ended(env, process)
    assert b"got hello\r\n" in output and b"on-a-tty\r\n" in output
    assert env.read_file(process.status_path) == b"3"
    with pytest.raises(InputUnavailable, match="no terminal input"):
        env.write_input(process, b"late\n")


def test_a_pty_process_outlives_the_environment_that_started_it(
    backend_factory: Factory,
) -> None:
    name = session()
    first = backend_factory(name)
    process = spawn(first, ASKS)
    first.detach()  # as a worker that stops and leaves its sandboxes to the next
    second = backend_factory(name)
    assert second.is_running(process)
    assert second.write_input(process, b"again\n") == 6
    assert b"got again\r\n" in ended(second, process)
    assert second.read_file(process.status_path) == b"3"


def test_a_foreground_pty_command_runs_on_a_terminal(backend_factory: Factory) -> None:
    env = backend_factory(session())
    result = run_on_pty(env, "[ -t 1 ] && echo on-a-tty; exit 4", timeout=60)
    assert (result.output, result.exit_code) == ("on-a-tty\r\n", 4)


def test_an_image_without_python3_refuses_pty_clearly(any_factory: Factory) -> None:
    env = any_factory(session())
    with pytest.raises(Unsupported, match="python3") as caught:
        env.spawn_on_pty(
            "touch /tmp/ran",
            output_path="/tmp/sbx-pty-np.out",
            status_path="/tmp/sbx-pty-np.status",
            env={"PATH": "/nonexistent"},  # as in an image without it
        )
    assert "\n" not in str(caught.value)
    assert env.exec("[ -e /tmp/ran ] || echo nothing-ran").output == "nothing-ran\n"
