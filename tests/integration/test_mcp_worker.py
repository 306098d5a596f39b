"""MCP servers from config.yaml, served by a real ``sbx worker`` and seen by the CLI.

A real MCP server runs as the worker's subprocess (the official SDK's server API).
Every server start appends its pid to a file, which is how the tests tell that a
CLI command did not connect. Waits are condition-based; there are no sleeps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from process_registry.sessions import load_or_create_secret
from registry.mcp import wire_name
from tests.fixtures_workers import settings_for
from tests.helpers import call, files_containing, require_module, wait_until
from tests.integration.test_cli import sbx
from worker.client import SandboxClient

require_module("mcp", "pip install 'sbx[mcp]'")  # the real MCP SDK, never faked

WAIT = 120.0  # an upper bound for a condition, not a timing assertion
TOKEN = "mcp-demo-token-5f0c2b7e9a"  # a configured env secret: must not leak anywhere

SERVER = '''
import os, sys
from mcp.server.mcpserver import MCPServer

with open(sys.argv[1], "a") as starts:  # one line per server process started
    starts.write(f"{os.getpid()}\\n")

app = MCPServer("demo")

@app.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return "echo:" + text

@app.tool()
def getenv(name: str) -> str:
    """One variable of the server's environment."""
    return os.environ.get(name, "<unset>")

@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()

if __name__ == "__main__":
    app.run()
'''

ECHO = wire_name("demo", "Demo", "echo")
GETENV = wire_name("demo", "Demo", "getenv")
PID = wire_name("demo", "Demo", "pid")


def write_config(home: Path, servers: dict[str, Any]) -> None:
    """config.yaml as an operator should keep it when it holds secrets: mode 0600."""
    path = home / "config.yaml"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(yaml.safe_dump({"mcp_servers": servers}))


@pytest.fixture
def starts(sbx_home: Path, tmp_path: Path) -> Path:
    """config.yaml with the demo server and a broken one; returns the servers' start log."""
    script = tmp_path / "demo_server.py"
    script.write_text(SERVER)
    log = tmp_path / "starts.log"
    log.touch()
    write_config(sbx_home, {
        "demo": {"name": "Demo", "command": sys.executable, "args": [str(script), str(log)],
                 "env": {"DEMO_TOKEN": TOKEN}, "timeout": 60},
        "broken": {"command": str(tmp_path / "no-such-server")},
    })  # fmt: skip
    return log


def started(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()]


def tools_json(home: Path) -> list[str]:
    p = sbx(home, None, "tools", "--json")
    assert p.returncode == 0, p.stderr
    return [d["function"]["name"] for d in json.loads(p.stdout)]


def doctor_mcp(home: Path) -> dict[str, dict[str, Any]]:
    p = sbx(home, None, "doctor", "--json")
    assert p.returncode == 0, p.stderr
    return {m["id"]: m for m in json.loads(p.stdout)["mcp_servers"]}


def test_configured_server_is_served_listed_from_cache_and_stopped(
    sbx_home: Path, starts: Path, start_worker: Any
) -> None:
    # the worker holds its signing key in its environment: the server must not inherit it
    key = load_or_create_secret(sbx_home / "secret.key").decode()
    worker = start_worker(None, SBX_SECRET_KEY=key)

    # the worker refreshes in the background; the CLI sees the result in the snapshot
    wait_until(lambda: ECHO in tools_json(sbx_home), WAIT, "the MCP tool in `sbx tools`")
    wait_until(lambda: doctor_mcp(sbx_home)["broken"]["last_error"] is not None, WAIT,
               "the broken server's refresh error")  # fmt: skip

    client = SandboxClient(session_id="mcp1", settings=settings_for(sbx_home, None))
    try:
        assert call(client, ECHO, {"text": "hi"})["content"] == "echo:hi"
        # the server sees its configured env, and nothing of the worker's secrets
        assert call(client, GETENV, {"name": "DEMO_TOKEN"})["content"] == TOKEN
        assert call(client, GETENV, {"name": "SBX_SECRET_KEY"})["content"] == "<unset>"
        assert call(client, GETENV, {"name": "SBX_HOME"})["content"] == "<unset>"
        server_pid = int(call(client, PID, {})["content"])
    finally:
        client.close()
    assert started(starts) == [server_pid]  # one long-lived process served every call

    report = doctor_mcp(sbx_home)
    assert report["demo"]["enabled"] and report["demo"]["last_error"] is None
    assert report["demo"]["cached_tools"] == 3
    assert "could not be started" in report["broken"]["last_error"]
    assert report["broken"]["cached_tools"] is None

    worker.stop()
    assert worker.proc.returncode == 0, worker.log()
    assert not psutil.pid_exists(server_pid), "the worker left its MCP server running"

    # no worker, no server: the CLI still lists the tools, and starts no server process
    assert {ECHO, GETENV, PID} <= set(tools_json(sbx_home))
    assert doctor_mcp(sbx_home)["demo"]["cached_tools"] == 3
    assert started(starts) == [server_pid]

    cache = sbx_home / "mcp-cache.json"
    assert cache.stat().st_mode & 0o777 == 0o600
    leaks = [
        f
        for f in files_containing(sbx_home, [TOKEN, key])
        if not f.startswith((str(sbx_home / "config.yaml"), str(sbx_home / "secret.key")))
    ]
    assert leaks == []  # neither in the snapshot nor in the worker's log


def test_bad_entry_is_a_clear_error_without_secrets(sbx_home: Path, tmp_path: Path) -> None:
    write_config(sbx_home, {"bad": {"args": ["x"], "env": {"API_TOKEN": TOKEN}}})
    p = sbx(sbx_home, None, "tools")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert "mcp_servers.bad.command: Field required" in p.stderr
    assert TOKEN not in p.stderr

    write_config(sbx_home, {"bad id!": {"command": "x"}, "t": {"command": "x", "timeout": 0}})
    p = sbx(sbx_home, None, "doctor", "--json")
    assert p.returncode == 2
    assert "mcp_servers.bad id!.[key]: String should match pattern" in p.stderr
    assert "mcp_servers.t.timeout: Input should be greater than 0" in p.stderr

    # the worker refuses to start on it, naming the entry and hiding the secret
    write_config(sbx_home, {"bad": {"command": "x", "env": {"API_TOKEN": [TOKEN]}}})
    p = sbx(sbx_home, None, "worker")
    assert (p.returncode, p.stderr.count("\n")) == (2, 1)
    assert "mcp_servers.bad.env.API_TOKEN" in p.stderr
    assert TOKEN not in p.stderr + p.stdout
