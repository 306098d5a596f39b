"""Persistent MCP sessions: tools/list_changed reaches the catalog and the registry unaided.

Real MCP servers run as subprocesses (the official SDK's server API). Waits are
condition-based (``wait_until``); no sleep is used for synchronisation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from registry.async_bridge import run_async
from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.dispatch import handle_function_call
from registry.hooks import HookRegistry
from registry.mcp import (
    McpCatalog,
    McpServerConfig,
    McpServerUnavailable,
    McpToolSpec,
    keep_registry_synced,
    sync_mcp_tools_to_registry,
    wire_name,
)
from tests.helpers import require_module, wait_until

require_module("mcp", "pip install 'sbx[mcp]'")  # the real MCP SDK, never faked

WAIT = 60.0  # an upper bound for a condition, not a timing assertion

DYNAMIC_SERVER = '''
import os
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("dynamic")

@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()

@app.tool()
async def add_tool(name: str, ctx: Context, notify: int = 1) -> str:
    """Add a tool, then announce the change ``notify`` times."""
    def dynamic(x: int = 0) -> int:
        return x
    app.add_tool(dynamic, name=name, description=f"Dynamic {name}.")
    for _ in range(notify):
        await ctx.session.send_tool_list_changed()
    return "added " + name

@app.tool()
def crash() -> str:
    """Exit without answering."""
    os._exit(3)

if __name__ == "__main__":
    app.run()
'''

# A bare JSON-RPC server (no SDK import, so it starts in milliseconds): it completes
# the handshake and lists no tools, then never answers anything else.
HUNG_SERVER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "hung", "version": "0"}}
    elif msg["method"] == "tools/list":
        result = {"tools": []}
    else:
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


@pytest.fixture
def server(tmp_path: Path) -> McpServerConfig:
    script = tmp_path / "dynamic_server.py"
    script.write_text(DYNAMIC_SERVER)
    return McpServerConfig(id="dyn", name="Dynamic", command=sys.executable, args=(str(script),))


@pytest.fixture
def catalogs() -> Iterator[Callable[[list[McpServerConfig]], McpCatalog]]:
    """Catalogs closed at teardown, then checked for leaked threads and child processes."""
    threads_before = set(threading.enumerate())
    me = psutil.Process()
    children_before = set(me.children(recursive=True))  # e.g. a session-wide redis-server
    made: list[McpCatalog] = []

    def make(servers: list[McpServerConfig]) -> McpCatalog:
        cat = McpCatalog(servers)
        made.append(cat)
        return cat

    yield make
    for cat in made:
        cat.close()

    def leaked_threads() -> list[str]:
        return [t.name for t in threading.enumerate()
                if t not in threads_before and t.name.startswith("mcp-")]  # fmt: skip

    def alive(p: psutil.Process) -> bool:
        try:
            return bool(p.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False

    def leaked_children() -> list[int]:
        # A terminated server exits on its own schedule: wait for the exit, do not race it.
        return [p.pid for p in me.children(recursive=True)
                if p not in children_before and alive(p)]  # fmt: skip

    with contextlib.suppress(AssertionError):
        wait_until(lambda: not leaked_threads() and not leaked_children(), 30, "cleanup")
    assert leaked_threads() == []
    assert leaked_children() == []


def server_pid(cat: McpCatalog, server_id: str) -> int:
    out = run_async(cat.call_tool(server_id, "pid", {}))
    return int(out["content"])


def gone(pid: int) -> bool:
    """The process is neither running nor an unreaped zombie."""
    return not psutil.pid_exists(pid)  # a zombie still "exists": it was not reaped


def tool_names(cat: McpCatalog, server_id: str) -> set[str]:
    return {t.name for t in cat.list_tools(server_id) or []}


def test_list_changed_updates_cache_and_registry_without_refresh(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog],
    ctx: ToolContext,
) -> None:  # fmt: skip
    reg = ToolRegistry()
    cat = catalogs([server])
    keep_registry_synced(reg, cat)
    assert sync_mcp_tools_to_registry(reg, cat) == []  # cold: one background refresh fired
    add = wire_name("dyn", "Dynamic", "add_tool")
    wait_until(lambda: reg.get(add) is not None, WAIT, "the first listing to be registered")

    # the call goes through the registry entry, hence the persistent session
    out = json.loads(handle_function_call(add, {"name": "extra"}, ctx=ctx, registry=reg,
                                          hooks=HookRegistry()))  # fmt: skip
    assert out["content"] == "added extra"

    extra = wire_name("dyn", "Dynamic", "extra")
    wait_until(lambda: reg.get(extra) is not None, WAIT, "list_changed to reach the registry")
    assert "extra" in tool_names(cat, "dyn")
    entry = reg.get(extra)
    assert entry is not None and entry.model_description == "Dynamic extra."
    # the new tool is callable on the same process that announced it
    out = json.loads(handle_function_call(extra, {"x": 7}, ctx=ctx, registry=reg,
                                          hooks=HookRegistry()))  # fmt: skip
    assert out["content"] == "7"


def test_burst_of_notifications_ends_with_the_final_list(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    cat = catalogs([server])
    cat.refresh_tools("dyn")
    for i in range(3):
        run_async(cat.call_tool("dyn", "add_tool", {"name": f"t{i}", "notify": 4}))
    wait_until(lambda: {"t0", "t1", "t2"} <= tool_names(cat, "dyn"), WAIT, "all three tools")


def test_notifications_during_a_refresh_coalesce_into_one_more() -> None:
    gate = threading.Event()
    calls: list[str] = []

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        calls.append(s.id)
        gate.wait(WAIT)  # the first refresh is in flight while the notifications arrive
        return [McpToolSpec(f"v{len(calls)}", "")]

    cat = McpCatalog([McpServerConfig("a", "A", "unused")], lister=lister)
    first = cat.on_tool_list_changed("a")
    assert first is not None
    assert all(cat.on_tool_list_changed("a") is first for _ in range(5))
    gate.set()
    cat.wait_idle()
    assert calls == ["a", "a"]  # the one in flight, plus one for all five notifications
    assert cat.list_tools("a") == [McpToolSpec("v2", "")]
    cat.close()


def test_listener_fires_only_when_the_list_changed() -> None:
    tools = [McpToolSpec("a", "")]
    seen: list[str] = []

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        return list(tools)

    cat = McpCatalog([McpServerConfig("s", "S", "unused")], lister=lister)
    unsubscribe = cat.subscribe(seen.append)
    cat.refresh_tools("s")
    cat.refresh_tools("s")
    tools.append(McpToolSpec("b", ""))
    cat.refresh_tools("s")
    unsubscribe()
    tools.pop()
    cat.refresh_tools("s")
    assert seen == ["s", "s"]
    cat.close()


def test_killed_server_is_detected_and_next_refresh_reconnects(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    cat = catalogs([server])
    assert "pid" in {t.name for t in cat.refresh_tools("dyn") or []}
    first = server_pid(cat, "dyn")
    assert cat.is_connected("dyn")
    os.kill(first, signal.SIGKILL)
    # the death itself is noticed, before any new request
    wait_until(lambda: not cat.is_connected("dyn"), WAIT, "the dead server to be noticed")
    wait_until(lambda: gone(first), WAIT, "the dead server to be reaped")

    assert "pid" in {t.name for t in cat.refresh_tools("dyn") or []}  # reconnected
    assert cat.last_error("dyn") is None
    assert server_pid(cat, "dyn") != first


def test_call_in_flight_when_server_dies_fails_clearly_and_next_call_reconnects(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    cat = catalogs([server])
    first = server_pid(cat, "dyn")
    with pytest.raises(McpServerUnavailable, match="closed the connection during tools/call"):
        run_async(cat.call_tool("dyn", "crash", {}))
    assert server_pid(cat, "dyn") != first  # a new process
    wait_until(lambda: gone(first), WAIT, "the crashed server to be reaped")


def test_restart_and_reconfigure_replace_the_process(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    cat = catalogs([server])
    first = server_pid(cat, "dyn")
    t = cat.on_server_restarted("dyn")
    assert t is not None
    t.join()
    assert gone(first) and "pid" in tool_names(cat, "dyn")
    second = server_pid(cat, "dyn")
    assert second != first

    t = cat.on_server_enabled(dataclasses.replace(server, env={"X": "1"}))
    assert t is not None
    t.join()
    assert gone(second) and server_pid(cat, "dyn") not in (first, second)

    t = cat.on_server_enabled(dataclasses.replace(server, enabled=False))
    assert t is not None
    t.join()
    assert not cat.is_connected("dyn")


def test_unanswered_call_times_out_with_a_clear_error(
    tmp_path: Path, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    script = tmp_path / "hung_server.py"
    script.write_text(HUNG_SERVER)
    hung = McpServerConfig("hung", "Hung", sys.executable, (str(script),), timeout=2.0)
    cat = catalogs([hung])
    assert cat.refresh_tools("hung") == []
    with pytest.raises(McpServerUnavailable, match="did not answer tools/call 'anything'"):
        run_async(cat.call_tool("hung", "anything", {}))


def test_unstartable_server_keeps_last_good_and_reports(
    catalogs: Callable[[list[McpServerConfig]], McpCatalog],
) -> None:
    cat = catalogs([McpServerConfig("nope", "Nope", "/nonexistent/mcp-server")])
    assert cat.refresh_tools("nope") is None
    assert "could not be started" in (cat.last_error("nope") or "")
    with pytest.raises(McpServerUnavailable):
        run_async(cat.call_tool("nope", "x", {}))


def test_close_stops_the_server_process(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog]
) -> None:
    cat = catalogs([server])
    pid = server_pid(cat, "dyn")
    assert psutil.Process(pid).ppid() == os.getpid()
    cat.close()
    assert gone(pid)
    assert cat.list_tools("dyn") is None  # closed: still cache-only, and no refresh starts
    with pytest.raises(McpServerUnavailable, match="closed"):
        run_async(cat.call_tool("dyn", "pid", {}))


ENV_SERVER = '''
import json, os
from mcp.server.mcpserver import MCPServer

app = MCPServer("env")

@app.tool()
def environment() -> str:
    """The server's whole environment."""
    return json.dumps(dict(os.environ))

if __name__ == "__main__":
    app.run()
'''


def test_server_gets_its_env_and_not_the_workers_secrets(
    tmp_path: Path, catalogs: Callable[[list[McpServerConfig]], McpCatalog],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("SBX_SECRET_KEY", "worker-signing-key")
    monkeypatch.setenv("SBX_BROKER_URL", "redis://:hunter2@broker:6379/0")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    script = tmp_path / "env_server.py"
    script.write_text(ENV_SERVER)
    env = {"API_TOKEN": "server-token", "PATH": os.environ["PATH"]}
    cfg = McpServerConfig("env", "Env", sys.executable, (str(script),), env=env)
    assert "server-token" not in repr(cfg)
    cat = catalogs([cfg])
    seen = json.loads(run_async(cat.call_tool("env", "environment", {}))["content"])
    assert seen["API_TOKEN"] == "server-token"
    leaked = {"SBX_SECRET_KEY", "SBX_BROKER_URL", "AWS_SECRET_ACCESS_KEY"} & set(seen)
    assert leaked == set()


def test_server_starts_when_stderr_has_no_file_descriptor(
    server: McpServerConfig, catalogs: Callable[[list[McpServerConfig]], McpCatalog],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    class LoggingProxy:  # what a Celery worker puts in sys.stderr
        def write(self, text: str) -> int:
            return len(text)

    monkeypatch.setattr(sys, "stderr", LoggingProxy())
    cat = catalogs([server])
    assert "pid" in tool_names_after_refresh(cat, "dyn")


def tool_names_after_refresh(cat: McpCatalog, server_id: str) -> set[str]:
    return {t.name for t in cat.refresh_tools(server_id) or []}
