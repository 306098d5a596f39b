"""Which backends a worker serves, and what it tells each backend's config about itself."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import redis

from environments.backends.local.config import LocalConfig
from environments.config import WorkerContext
from environments.pool import SandboxPool
from process_registry.runtime_dir import runtime_dir
from process_registry.sessions import SessionSigner
from worker.protocol.ledger import CallLedger
from worker.protocol.mac import message_body, prove
from worker.protocol.messages import ToolCallMessage
from worker.service.backends import (
    BackendConfigs,
    BackendNotAllowed,
    allowed_backends,
    check_backend_allowed,
)
from worker.service.calls import execute_call
from worker.service.runtime import WorkerRuntime
from worker.settings import Settings

SIGNER = SessionSigner(b"k" * 32)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("SBX_"):
            monkeypatch.delenv(name)


def test_the_default_backend_alone_unless_the_operator_says_more(tmp_path: Path) -> None:
    assert allowed_backends(Settings(home=tmp_path)) == {"local"}
    assert allowed_backends(Settings(home=tmp_path, backend="docker")) == {"docker"}
    wide = Settings(home=tmp_path, allowed_backends="local, docker,singularity")  # type: ignore[arg-type]
    assert allowed_backends(wide) == {"local", "docker", "apptainer"}
    check_backend_allowed(wide, "apptainer")
    with pytest.raises(BackendNotAllowed, match="SBX_ALLOWED_BACKENDS"):
        check_backend_allowed(Settings(home=tmp_path), "docker")


def test_names_come_as_a_comma_list_in_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SBX_HOME", str(tmp_path))
    monkeypatch.setenv("SBX_ALLOWED_BACKENDS", "local,docker")
    monkeypatch.setenv("SBX_FORWARD_ENV", "PIP_INDEX_URL, GIT_AUTHOR_NAME")
    settings = Settings()
    assert settings.allowed_backends == ("local", "docker")
    assert settings.forward_env == ("PIP_INDEX_URL", "GIT_AUTHOR_NAME")


def test_a_call_naming_another_backend_is_denied_and_creates_nothing(
    tmp_path: Path, external_redis_url: str
) -> None:
    made: list[tuple[str, str]] = []

    def factory(backend: str, session_id: str) -> Any:
        made.append((backend, session_id))
        raise AssertionError("no sandbox may be created for a denied call")

    runtime = WorkerRuntime(
        settings=Settings(home=tmp_path),
        broker_url="redis://unused",
        signer=SIGNER,
        # The ledger only answers the session's revocation epoch while its proof is checked.
        ledger=CallLedger(redis.Redis.from_url(external_redis_url), claim_ttl=60, lost_after=10),
        pool=SandboxPool(factory),
    )
    for backend in ("docker", "ssh", "singularity", "modal"):
        message = ToolCallMessage(call_id=f"c-{backend}", session_id="s1", tool="terminal",
                                  args={"command": "true"}, backend=backend)  # fmt: skip
        proof = prove(SIGNER.token("s1"), message_body("call", message))
        signed = message.model_copy(update={"proof": proof}).model_dump(mode="json")
        result = json.loads(execute_call(signed, runtime))
        assert result["status"] == "denied" and "nothing was run" in result["error"]
    assert made == [] and len(runtime.pool) == 0


def test_worker_configs_hide_the_workers_paths_and_forward_what_it_is_told(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    settings = Settings(home=home, forward_env=("FORWARD_ME",),  # type: ignore[arg-type]
                        ledger_url="redis+socket:///run/redis-ledger/redis.sock")  # fmt: skip
    config = BackendConfigs(settings)("local")
    assert isinstance(config, LocalConfig)
    runtime = runtime_dir(home)
    assert config.state_dir == str(runtime / "sandboxes" / "local")
    assert {str(home), str(runtime), "/run/redis-ledger"} <= set(config.hide)
    assert config.forward_env == ("FORWARD_ME",)
    # The operator's own entries stay, first.
    own = LocalConfig(hide=("/srv/secrets",), forward_env=("A",), state_dir="/var/lib/sbx")
    completed = own.for_worker(
        WorkerContext(state_dir="/x", private_paths=("/h/",), forward_env=("B",))
    )
    assert completed.hide == ("/srv/secrets", "/h")
    assert completed.forward_env == ("A", "B") and completed.state_dir == "/var/lib/sbx"
