"""The daytona backend's errors: credentials, quotas, an unreachable service, leftovers, secrets.

Every failure is one of sbx's error classes with one clear line that never
carries the API key; a failed create leaves no sandbox behind.
"""

from __future__ import annotations

import importlib.metadata
import re
import secrets
import socket
import time
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest

from environments.conformance_tools import wait_in_sandbox
from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxError,
    ServiceUnreachable,
)
from tests.fixtures_daytona import daytona_config
from tests.helpers import REPO, free_port

pytest.importorskip("daytona")

from environments.backends.daytona.environment import DaytonaEnvironment
from tests.fakes.daytona import SDK_VERSION, FakeDaytona


@pytest.fixture
def session() -> str:
    return f"dte-{secrets.token_hex(4)}"


def _one_clear_line(error: BaseException, *secrets_: str) -> str:
    text = str(error)
    assert text and "\n" not in text, repr(text)
    for secret in secrets_:
        assert secret not in text
    return text


def test_installed_sdk_is_the_version_the_fake_and_the_pin_speak() -> None:
    installed = importlib.metadata.version("daytona")
    assert installed.split(".")[:2] == SDK_VERSION.split(".")[:2], (
        f"daytona {installed} is installed but the fake Daytona and the backend were written "
        f"against {SDK_VERSION}: re-read the SDK's wire protocol, update tests/fakes/daytona "
        "and the pin in pyproject.toml together"
    )
    pyproject = (REPO / "pyproject.toml").read_text()
    pin = re.search(r'^daytona = \["daytona>=([\d.]+),<([\d.]+)"\]', pyproject, re.M)
    assert pin is not None, "the daytona extra must pin a tested minor version"
    minor = ".".join(SDK_VERSION.split(".")[:2])
    assert pin.group(1) == minor, (pin.group(1), minor)


def test_availability_and_the_doctors_view(daytona_fake: FakeDaytona) -> None:
    good = daytona_config(daytona_fake)
    assert DaytonaEnvironment.availability(good)[0] is True
    wrong = daytona_config(daytona_fake, api_key="dtn_wrong_key")
    available, reason = DaytonaEnvironment.availability(wrong)
    assert not available and "rejected the API key" in reason and "dtn_wrong_key" not in reason
    view = good.public_view()
    assert view["api_key"] == "**********" and daytona_fake.token not in repr(view)


def test_wrong_api_key_is_authentication_failed(daytona_fake: FakeDaytona, session: str) -> None:
    wrong = "dtn_wrong_" + secrets.token_hex(8)
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake, api_key=wrong))
    with pytest.raises(AuthenticationFailed) as caught:
        env.exec("true")
    assert "rejected the API key" in _one_clear_line(caught.value, wrong, daytona_fake.token)
    assert isinstance(caught.value, PermissionError)


def test_missing_api_key_is_credentials_missing(
    daytona_fake: FakeDaytona, session: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("DAYTONA_API_KEY", "DAYTONA_JWT_TOKEN", "SBX_DAYTONA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # the SDK also reads a .env file in the working directory
    with pytest.raises(CredentialsMissing) as caught:
        DaytonaEnvironment(session, config=daytona_config(daytona_fake, api_key=None))
    assert "DAYTONA_API_KEY" in _one_clear_line(caught.value)


def test_the_sdks_own_variables_are_honoured(
    daytona_fake: FakeDaytona, session: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", daytona_fake.token)
    monkeypatch.setenv("DAYTONA_API_URL", daytona_fake.api_url)
    monkeypatch.setenv("DAYTONA_TARGET", "us")
    monkeypatch.chdir(tmp_path)
    config = daytona_config(daytona_fake, api_key=None, api_url=None, target=None)
    env = DaytonaEnvironment(session, config=config)
    try:
        assert env.exec("echo via-env").output == "via-env\n"
        daytona_fake.inject_create_error(500, f"echoed {daytona_fake.token}")
        other = DaytonaEnvironment(session + "-b", config=config)
        with pytest.raises(SandboxError) as caught:
            other.exec("true")
        _one_clear_line(caught.value, daytona_fake.token)
    finally:
        env.close()


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Total CPU limit exceeded. Maximum allowed: 4.\nUpgrade your tier to get more."),
        (429, "ThrottlerException: Too Many Requests"),
    ],
)
def test_quota_and_rate_limits_are_quota_exceeded(
    daytona_fake: FakeDaytona, session: str, status: int, message: str
) -> None:
    daytona_fake.inject_create_error(status, message)
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake))
    with pytest.raises(QuotaExceeded) as caught:
        env.exec("true")
    text = _one_clear_line(caught.value, daytona_fake.token)
    assert message.split("\n")[0] in text
    assert daytona_fake.store.matching({"sbx.session": session}) == []


def test_a_create_failing_half_way_leaves_nothing_behind(
    daytona_fake: FakeDaytona, session: str
) -> None:
    # The service created the sandbox, then failed; the message even echoes the key.
    daytona_fake.inject_create_error(
        500, f"runner lost while starting (token {daytona_fake.token})", created=True
    )
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake))
    with pytest.raises(SandboxError) as caught:
        env.exec("true")
    _one_clear_line(caught.value, daytona_fake.token)
    assert daytona_fake.store.matching({"sbx.session": session}) == []
    # The next call creates a working sandbox.
    assert env.exec("echo fine").output == "fine\n"
    env.close()


def test_refused_connection_is_service_unreachable(daytona_fake: FakeDaytona, session: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/api"
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake, api_url=url))
    with pytest.raises(ServiceUnreachable) as caught:
        env.exec("true")
    assert isinstance(caught.value, ConnectionError)
    _one_clear_line(caught.value, daytona_fake.token)


@pytest.fixture
def black_hole() -> Iterator[str]:
    """An API URL whose server accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/api"


def test_silent_service_is_an_error_within_the_request_deadline(
    daytona_fake: FakeDaytona, session: str, black_hole: str
) -> None:
    config = daytona_config(daytona_fake, api_url=black_hole, request_timeout=1)
    env = DaytonaEnvironment(session, config=config)
    started = time.monotonic()
    with pytest.raises(ServiceUnreachable) as caught:
        env.exec("true")
    # Generous: the SDK retries reads a few times; what matters is that it ends.
    assert time.monotonic() - started < 60
    _one_clear_line(caught.value, daytona_fake.token)


def test_the_api_key_never_reaches_the_sandbox(daytona_fake: FakeDaytona, session: str) -> None:
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake))
    try:
        seen = env.exec("env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\000' '\\n'").output
        assert "HOME=" in seen and daytona_fake.token not in seen
        where = env.spawn(
            "env", output_path="/tmp/bg.out", status_path="/tmp/bg.status", env={"X": "1"}
        )
        assert where.pid > 0
        env.exec("while [ ! -e /tmp/bg.status ]; do sleep 0.05; done", timeout=30)
        assert daytona_fake.token.encode() not in env.read_file("/tmp/bg.out")
    finally:
        env.close()
    recorded = repr(daytona_fake.creates) + repr(daytona_fake.pty_opens)
    assert daytona_fake.token not in recorded


def test_a_timeout_the_service_fails_to_enforce_leaves_no_command_in_the_way(
    daytona_fake: FakeDaytona, session: str
) -> None:
    """The toolbox failing while sbx kills a timed-out command is one clear error; the
    next command runs at once on a new shell, and the runaway command is ended."""
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake))
    try:
        env.exec("cd /tmp; export KEPT=yes")
        daytona_fake.failing["/process/execute"] = 502
        try:
            with pytest.raises(SandboxError) as caught:
                env.exec("trap '' TERM; sleep 4243", timeout=1)
        finally:
            daytona_fake.failing.clear()
        _one_clear_line(caught.value)
        after = env.exec('echo "$KEPT $PWD"', timeout=30)
        assert (after.exit_code, after.output, after.shell_restarted) == (0, "yes /tmp\n", True)
        assert wait_in_sandbox(env, '! pgrep -f "sleep 424[3]" >/dev/null')
    finally:
        env.close()


@pytest.mark.parametrize("status", [502, 503])
def test_a_file_transfer_the_service_fails_is_one_clear_line(
    daytona_fake: FakeDaytona, session: str, status: int
) -> None:
    """The SDK's file transfers raise the HTTP client's own error: sbx says what the
    service answered, not the client's URL and web link, and the file is there after."""
    env = DaytonaEnvironment(session, config=daytona_config(daytona_fake))
    try:
        env.write_file("/tmp/kept", b"kept\n")
        answered = f"the service answered {status} {HTTPStatus(status).phrase}"
        for route, transfer in (
            ("/files/bulk-download", lambda: env.read_file("/tmp/kept")),
            ("/files/bulk-upload", lambda: env.write_file("/tmp/other", b"x")),
        ):
            daytona_fake.failing[route] = status
            try:
                with pytest.raises(SandboxError) as caught:
                    transfer()
            finally:
                daytona_fake.failing.clear()
            text = _one_clear_line(caught.value, daytona_fake.token)
            assert answered in text, text
            assert "http" not in text.lower().replace(answered.lower(), ""), text
        assert env.read_file("/tmp/kept") == b"kept\n"
    finally:
        env.close()
