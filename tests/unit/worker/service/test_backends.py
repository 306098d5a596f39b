"""Backend configs from the one settings object: variables over config.yaml over defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from environments.backends.docker.config import DockerConfig
from environments.config import BackendConfig
from worker.service.backends import BackendConfigs, backend_config
from worker.settings import Settings, SettingsError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("SBX_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    return tmp_path


def test_yaml_mapping_then_variables_win(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "config.yaml").write_text(
        "docker:\n  image: from-yaml:1\n  memory: 1g\nbackends:\n  ssh:\n    port: 2222\n"
    )
    monkeypatch.setenv("SBX_DOCKER_IMAGE", "from-env:2")
    monkeypatch.setenv("SBX_DOCKER_CAP_ADD", '["NET_BIND_SERVICE"]')
    settings = Settings()
    docker = backend_config(settings, "docker")
    assert isinstance(docker, DockerConfig)
    assert (docker.image, docker.memory, docker.cap_add) == (
        "from-env:2",
        "1g",
        ("NET_BIND_SERVICE",),
    )
    assert backend_config(settings, "ssh").model_dump()["port"] == 2222
    assert backend_config(settings, "local") == backend_class_defaults("local")


def backend_class_defaults(name: str) -> BackendConfig:
    from environments.registry import backend_class

    return backend_class(name).config_model()


def test_alias_settings_reach_the_canonical_backend(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBX_SINGULARITY_IMAGE", "/images/a.sif")
    config = backend_config(Settings(), "apptainer")
    assert config.model_dump()["image"] == "/images/a.sif"
    assert BackendConfigs(Settings())("singularity") == config


def test_invalid_backend_settings_name_the_key_never_the_value(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBX_DOCKER_PIDS_LIMIT", "secret-looking-9f3")
    monkeypatch.setenv("SBX_DOCKER_NO_SUCH_KEY", "x")
    with pytest.raises(SettingsError) as info:
        backend_config(Settings(), "docker")
    message = str(info.value)
    assert "pids_limit" in message and "no_such_key" in message
    assert "secret-looking-9f3" not in message and "\n" not in message


def test_public_view_masks_secrets_and_sandbox_variables() -> None:
    class WithSecret(BackendConfig):
        type: str = "x"
        token: SecretStr = SecretStr("tok-123")
        env: dict[str, str] = {"DB_PASS": "pw-456"}

    view = WithSecret().public_view()
    assert view == {"type": "x", "token": "**********", "env": {"DB_PASS": "**********"}}
