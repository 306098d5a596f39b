"""MCP servers added, changed, disabled, re-enabled and removed in config.yaml reach a
running ``sbx worker`` without a restart: by watching the file, and on SIGHUP.

The server is a real MCP server (the official SDK) started by the worker; every start
appends its pid to a file. Waits are on conditions; there are no sleeps.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import process_gone, require_module, wait_until
from tests.integration.test_mcp_worker import (
    ECHO,
    GETENV,
    PID,
    SERVER,
    started,
    tools_json,
    write_config,
)
from worker.client import SandboxClient

require_module("mcp", "pip install 'sbx[mcp]'")

WAIT = 120.0  # an upper bound for a condition, not a timing assertion


@pytest.fixture
def demo(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The demo server's config.yaml entry, and its start log."""
    script = tmp_path / "demo_server.py"
    script.write_text(SERVER)
    log = tmp_path / "starts.log"
    log.touch()
    entry = {"name": "Demo", "command": sys.executable, "args": [str(script), str(log)],
             "env": {"DEMO_TOKEN": "first"}, "timeout": 60}  # fmt: skip
    return entry, log


def answer(client: SandboxClient, tool: str, args: dict[str, Any]) -> str:
    """The tool's text, or its error (``Unknown tool`` once it left the registry)."""
    result = json.loads(client.tool_call(tool, args))
    return str(result.get("content", result.get("error")))


def test_config_changes_reach_the_running_worker(
    sbx_home: Path, start_worker: Any, demo: tuple[dict[str, Any], Path]
) -> None:
    entry, starts = demo
    write_config(sbx_home, {})
    worker = start_worker(None)
    client = SandboxClient(session_id="mcp-reload", settings=settings_for(sbx_home, None))
    try:
        assert "Unknown tool" in answer(client, ECHO, {"text": "x"})

        # enabled: served without a restart
        write_config(sbx_home, {"demo": entry})
        wait_until(lambda: answer(client, ECHO, {"text": "a"}) == "echo:a", WAIT,
                   "the added server's tool")  # fmt: skip
        first = int(answer(client, PID, {}))

        # changed: a new process with the new environment
        write_config(sbx_home, {"demo": {**entry, "env": {"DEMO_TOKEN": "second"}}})
        wait_until(lambda: answer(client, GETENV, {"name": "DEMO_TOKEN"}) == "second", WAIT,
                   "the changed server's new process")  # fmt: skip
        second = int(answer(client, PID, {}))
        assert second != first
        wait_until(lambda: process_gone(first), WAIT, "the old server process to stop")

        # disabled: its tools leave the registry and its process stops
        write_config(sbx_home, {"demo": {**entry, "env": {"DEMO_TOKEN": "second"},
                                         "enabled": False}})  # fmt: skip
        wait_until(lambda: "Unknown tool" in answer(client, ECHO, {"text": "b"}), WAIT,
                   "the disabled server's tools to go")  # fmt: skip
        wait_until(lambda: process_gone(second), WAIT, "the disabled server's process to stop")

        # enabled again: back, in a new process
        write_config(sbx_home, {"demo": {**entry, "env": {"DEMO_TOKEN": "second"}}})
        wait_until(lambda: answer(client, ECHO, {"text": "c"}) == "echo:c", WAIT,
                   "the re-enabled server's tool")  # fmt: skip
        third = int(answer(client, PID, {}))
        assert third not in (first, second)

        # the CLI's catalog stays cache-only: it lists the tool and starts no server
        before = started(starts)
        assert ECHO in tools_json(sbx_home)
        assert started(starts) == before

        # removed from the file: gone, process stopped
        write_config(sbx_home, {})
        wait_until(lambda: "Unknown tool" in answer(client, ECHO, {"text": "d"}), WAIT,
                   "the removed server's tools to go")  # fmt: skip
        wait_until(lambda: process_gone(third), WAIT, "the removed server's process to stop")
    finally:
        client.close()
    assert worker.proc.poll() is None, worker.log()  # one worker all along
    assert worker.log().count("MCP servers reloaded from config.yaml") >= 5


def test_sighup_reloads_without_polling_or_restart(
    sbx_home: Path, start_worker: Any, demo: tuple[dict[str, Any], Path]
) -> None:
    entry, _ = demo
    write_config(sbx_home, {})
    worker = start_worker(None, SBX_MCP_RELOAD_INTERVAL="0")  # the file is never looked at
    pid = worker.proc.pid
    write_config(sbx_home, {"demo": entry})
    worker.proc.send_signal(signal.SIGHUP)
    with SandboxClient(session_id="mcp-hup", settings=settings_for(sbx_home, None)) as client:
        wait_until(lambda: answer(client, ECHO, {"text": "h"}) == "echo:h", WAIT,
                   "the server added before SIGHUP")  # fmt: skip
    assert worker.proc.pid == pid and worker.proc.poll() is None
    log = worker.log()
    assert "MCP servers reloaded from config.yaml: demo changed or added" in log
    assert log.count("ready on") == 1, log  # not restarted (Celery's SIGHUP would re-exec)


def test_an_invalid_edit_changes_nothing(
    sbx_home: Path, start_worker: Any, demo: tuple[dict[str, Any], Path]
) -> None:
    entry, _ = demo
    write_config(sbx_home, {"demo": entry})
    worker = start_worker(None, SBX_MCP_RELOAD_INTERVAL="0")
    with SandboxClient(session_id="mcp-bad", settings=settings_for(sbx_home, None)) as client:
        wait_until(lambda: answer(client, ECHO, {"text": "1"}) == "echo:1", WAIT,
                   "the configured server's tool")  # fmt: skip
        (sbx_home / "config.yaml").write_text("mcp_servers: {demo: {command: [unclosed\n")
        worker.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "config.yaml not reloaded" in worker.log(), WAIT,
                   "the worker to report the invalid file")  # fmt: skip
        assert answer(client, ECHO, {"text": "2"}) == "echo:2"
    assert "unclosed" not in worker.log()  # where the file is wrong, never what it says
