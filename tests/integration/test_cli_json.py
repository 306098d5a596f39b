"""``--json`` on ``sbx call`` (one JSON document around the tool result) and on
``sbx worker`` (JSON log lines), run as a user runs them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from process_registry.sessions import load_or_create_secret
from tests.fixtures_workers import settings_for, worker_env
from tests.helpers import REPO, wait_until
from tests.integration.test_cli import sbx
from worker.client import SandboxClient


def test_call_json_wraps_the_result_in_one_document(sbx_home: Path, start_worker: Any) -> None:
    start_worker(None)
    env = {"SBX_SESSION_ID": "json-call"}
    raw = sbx(sbx_home, None, "call", "terminal", '{"command": "echo hi"}', **env)
    assert raw.returncode == 0, raw.stderr
    p = sbx(sbx_home, None, "call", "--json", "terminal", '{"command": "echo hi"}', **env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # exactly one document: json.loads rejects anything after it
    assert (doc["tool"], doc["session_id"], doc["is_json"]) == ("terminal", "json-call", True)
    assert (doc["result"]["output"], doc["result"]["exit_code"]) == ("hi\n", 0)
    assert set(doc["result"]) == set(json.loads(raw.stdout))  # the same result, decoded

    # An error result is still a result: exit 0, one document.
    p = sbx(sbx_home, None, "call", "--json", "terminal", "{not json", **env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["is_json"] is True and "not valid JSON" in doc["result"]["error"]


def test_worker_json_writes_json_log_lines(sbx_home: Path) -> None:
    load_or_create_secret(sbx_home / "secret.key")
    log_path = sbx_home / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli.main", "worker", "--json", "--loglevel", "INFO"],
            env=worker_env(sbx_home, None), cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        with SandboxClient(session_id="json-log", settings=settings_for(sbx_home, None)) as c:
            wait_until(lambda: c.ping(timeout=1.0) or proc.poll() is not None, 60,
                       "the worker to answer")  # fmt: skip
            assert proc.poll() is None, log_path.read_text()
            assert c.exec("echo logged").output == "logged\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    assert lines
    records = []
    for line in lines:
        record = json.loads(line)  # every line, the start-up included, is one JSON object
        assert isinstance(record, dict), line
        assert {"ts", "level", "logger", "message"} <= set(record), line
        records.append(record)
    messages = [r["message"] for r in records]
    assert any("ready" in m for m in messages), messages
    assert all(isinstance(r["level"], str) for r in records)
