"""The one settings object: environment, config.yaml, errors that hide values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.settings import Settings, SettingsError, get_settings


def test_settings_from_env_and_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.yaml").write_text("backend: docker\noutput_limit: 5000\n")
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    monkeypatch.setenv("SBX_OUTPUT_LIMIT", "7000")
    s = Settings()
    assert (s.home, s.backend, s.output_limit) == (tmp_path, "docker", 7000)


def test_secret_key_is_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBX_SECRET_KEY", "very-secret-value")
    s = Settings()
    assert "very-secret-value" not in repr(s) and "very-secret-value" not in str(s)
    assert os.environ["SBX_SECRET_KEY"] == "very-secret-value"


def test_client_without_token_or_secret_is_refused(tmp_path: Path) -> None:
    from worker.client import ClientError, SandboxClient

    settings = Settings(home=tmp_path, broker_url="redis://127.0.0.1:1/0")
    with pytest.raises(ClientError, match="SBX_SESSION_TOKEN"):
        SandboxClient(session_id="s", settings=settings)


def settings_error() -> str:
    """The message of the :class:`SettingsError` reading the settings afresh raises."""
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError) as info:
            get_settings()
    finally:
        get_settings.cache_clear()
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("SBX_MCP_SERVERS", '{"gh": {"command": "x", "env": {"T": "hidden-7c1"}', "mcp_servers"),
        ("SBX_OUTPUT_LIMIT", "hidden-7c1", "output_limit"),
    ],
)
def test_invalid_settings_are_one_line_naming_the_key_never_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, named: str
) -> None:
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    monkeypatch.setenv(name, value)
    message = settings_error()
    assert named in message and "hidden-7c1" not in message and "\n" not in message


def test_a_config_yaml_that_is_not_yaml_names_the_line_not_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text("backend: local\nsecret_key: [hidden-7c1\n")
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    message = settings_error()
    assert "not valid YAML (line" in message and "hidden-7c1" not in message


def test_a_config_yaml_with_secrets_readable_by_others_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("secret_key: " + "k" * 40 + "\n")
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    config.chmod(0o644)
    with caplog.at_level("WARNING", logger="worker.settings"):
        Settings()
    assert "chmod 600" in caplog.text
    caplog.clear()
    config.chmod(0o600)
    with caplog.at_level("WARNING", logger="worker.settings"):
        Settings()
    assert caplog.text == ""
