"""Worker logs: JSON lines from sbx and Celery alike with SBX_LOG_FORMAT=json; text by
default; never a command, its output or a secret, even at DEBUG."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for, worker_env
from tests.ops_support import OpsWorker
from worker.client import SandboxClient
from worker.service.log_format import session_digest

SECRET = "ghp_" + "Q4w8" * 9  # a GitHub token the redactor recognises
MARKER = "log-output-marker-9931"


def _run_calls(home: Path, session: str) -> list[str]:
    """A call whose command holds a secret and prints a marker, one that fails, and one
    refused for a bad token; their call ids."""
    ids = [uuid.uuid4().hex for _ in range(3)]
    with SandboxClient(session_id=session, settings=settings_for(home, None)) as client:
        command = f"TOKEN={SECRET}; echo {MARKER} $TOKEN"
        out = json.loads(client.tool_call("terminal", {"command": command}, call_id=ids[0]))
        assert MARKER in out["output"]
    settings = settings_for(home, None)
    with SandboxClient(session_id=session, backend="nosuch", settings=settings) as client:
        failed = json.loads(  # the worker logs this failure, inside the call
            client.tool_call("terminal", {"command": f"echo {MARKER} {SECRET}"}, call_id=ids[1])
        )
        assert failed.get("error")
    with SandboxClient(
        session_id=session, session_token="forged", settings=settings_for(home, None)
    ) as forged:
        denied = json.loads(forged.tool_call(
            "terminal", {"command": f"echo {MARKER} {SECRET}"}, call_id=ids[2]))  # fmt: skip
        assert denied["status"] == "denied"
    return ids


@pytest.fixture
def secret_loaded(sbx_home: Path) -> Path:
    from process_registry.sessions import load_or_create_secret

    load_or_create_secret(sbx_home / "secret.key")
    return sbx_home


def test_json_logs_are_one_object_per_line_with_call_context_and_no_payload(
    secret_loaded: Path,
) -> None:
    home = secret_loaded
    worker = OpsWorker(worker_env(home, None, SBX_LOG_FORMAT="json"), home,
                       "--loglevel", "DEBUG").start()  # fmt: skip
    try:
        worker.wait_healthy()
        session = f"logs-{uuid.uuid4().hex}"
        ids = _run_calls(home, session)
    finally:
        assert worker.stop() == 0
    lines = [line for line in worker.logs().splitlines() if line.strip()]
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is JSON
    assert records and all(
        {"ts", "level", "logger", "worker", "call_id", "session", "message"} <= r.keys()
        for r in records
    )
    assert {r["worker"] for r in records} == {worker.worker_id}
    loggers = {r["logger"].split(".")[0] for r in records}
    assert {"celery", "worker"} <= loggers  # Celery's records and sbx's, one format
    in_calls = [r for r in records if r["call_id"] in ids]
    assert in_calls, "no record carried a call id"
    assert {r["session"] for r in in_calls} == {session_digest(session)}
    text = worker.logs()
    for needle in (SECRET, MARKER, session, "Q4w8"):
        assert needle not in text, needle


def test_text_logs_stay_the_default_and_keep_payloads_out(secret_loaded: Path) -> None:
    home = secret_loaded
    worker = OpsWorker(worker_env(home, None), home, "--loglevel", "DEBUG").start()
    try:
        worker.wait_healthy()
        session = f"logs-{uuid.uuid4().hex}"
        _run_calls(home, session)
    finally:
        assert worker.stop() == 0
    lines = worker.err.read_text().splitlines()
    assert any(line.startswith("INFO celery.") for line in lines)
    assert not any(line.startswith("{") for line in lines)
    text = worker.logs()
    for needle in (SECRET, MARKER, session, "Q4w8"):
        assert needle not in text, needle
