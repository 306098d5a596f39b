"""Cache-only MCP catalog, wire names and registry sync, against a real MCP stdio server."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.deferral import should_defer
from registry.dispatch import handle_function_call
from registry.hooks import HookRegistry
from registry.mcp import (
    MAX_TOOL_NAME,
    McpCatalog,
    McpServerConfig,
    McpToolSpec,
    sync_mcp_tools_to_registry,
    wire_name,
)
from tests.helpers import require_module

require_module("mcp", "pip install 'sbx[mcp]'")  # the real MCP SDK, never faked

SERVER = '''
from mcp.server.mcpserver import MCPServer
app = MCPServer("demo")

@app.tool()
def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b

@app.tool()
def wipe(path: str) -> str:
    """Delete a path."""
    return "wiped " + path

if __name__ == "__main__":
    app.run()
'''


@pytest.fixture
def server(tmp_path: Path) -> McpServerConfig:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return McpServerConfig(id="srv-1", name="Demo Server", command=sys.executable,
                           args=(str(script),), force_prompt_tools=frozenset({"wipe"}))  # fmt: skip


def test_wire_name_format_digest_and_length() -> None:
    a = wire_name("id-1", "My Server", "search files")
    assert a.startswith("mcp__my_server__search_files__") and len(a.split("__")[-1]) == 8
    assert a != wire_name("id-2", "My Server", "search files")  # digest: stable server id
    assert a == wire_name("id-1", "My Server", "search files")
    long = wire_name("x", "s" * 100, "t" * 100)
    assert len(long) <= MAX_TOOL_NAME and long.count("__") == 3


def test_wire_name_non_latin_falls_back() -> None:
    name = wire_name("id", "サーバー", "도구")
    assert name.startswith("mcp__server__tool__")


def test_list_tools_is_cache_only_and_cold_fires_one_refresh() -> None:
    calls: list[str] = []
    release, finished = threading.Event(), threading.Event()

    async def held_lister(s: McpServerConfig) -> list[McpToolSpec]:
        calls.append(s.id)
        release.wait(60)  # held until the reads below are done
        finished.set()
        return [McpToolSpec("t", "T.")]

    cat = McpCatalog([McpServerConfig("a", "A", "unused")], lister=held_lister)
    assert cat.list_tools("a") is None and cat.list_tools("a") is None
    # Both reads answered while the refresh was still held: they never waited for it.
    assert not finished.is_set()
    release.set()
    cat.wait_idle()
    assert calls == ["a"]  # one background refresh, not one per read
    assert cat.list_tools("a") == [McpToolSpec("t", "T.")]


def test_warmed_empty_is_not_cold() -> None:
    calls: list[str] = []

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        calls.append(s.id)
        return []

    cat = McpCatalog([McpServerConfig("a", "A", "unused")], lister=lister)
    cat.refresh_tools("a")
    assert cat.list_tools("a") == [] and calls == ["a"]
    cat.wait_idle()
    assert calls == ["a"]


def test_failed_refresh_keeps_last_good() -> None:
    fail = {"now": False}

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        if fail["now"]:
            raise ConnectionError("server down")
        return [McpToolSpec("t", "T.")]

    cat = McpCatalog([McpServerConfig("a", "A", "unused")], lister=lister)
    cat.refresh_tools("a")
    fail["now"] = True
    assert cat.refresh_tools("a") == [McpToolSpec("t", "T.")]
    assert cat.list_tools("a") == [McpToolSpec("t", "T.")]
    assert "server down" in (cat.last_error("a") or "")


def test_list_changed_enable_and_restart_trigger_refresh() -> None:
    calls: list[str] = []

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        calls.append(s.id)
        return []

    cat = McpCatalog([McpServerConfig("a", "A", "unused")], lister=lister)
    for t in (cat.on_tool_list_changed("a"),):
        assert t is not None
        t.join()
    t2 = cat.on_server_restarted("a")
    assert t2 is not None
    t2.join()
    t3 = cat.on_server_enabled(McpServerConfig("b", "B", "unused"))
    assert t3 is not None
    t3.join()
    assert calls == ["a", "a", "b"]


def test_sync_never_connects_and_keeps_entries_of_cold_server() -> None:
    async def never(s: McpServerConfig) -> list[McpToolSpec]:
        raise AssertionError("sync must not wait for a connection")

    reg = ToolRegistry()
    cat = McpCatalog([McpServerConfig("dead", "Dead", "/nonexistent")], lister=never)
    assert sync_mcp_tools_to_registry(reg, cat) == []
    cat.wait_idle()
    assert reg.names() == []


def test_real_server_sync_namespace_and_call(server: McpServerConfig, ctx: ToolContext) -> None:
    reg = ToolRegistry()
    with McpCatalog([server]) as cat:  # close() stops the server's session and process
        assert sync_mcp_tools_to_registry(reg, cat) == []  # cold: nothing yet, refresh fired
        cat.wait_idle()
        names = sync_mcp_tools_to_registry(reg, cat)
        add = reg.get(wire_name("srv-1", "Demo Server", "add"))
        assert add is not None and add.name in names
        assert (add.namespace, add.namespace_label) == ("mcp:srv-1", "mcp:Demo Server")
        assert add.model_description == "Add two numbers."
        assert add.parameters["required"] == ["a"]
        out = json.loads(handle_function_call(add.name, {"a": 40}, ctx=ctx, registry=reg,
                                              hooks=HookRegistry()))  # fmt: skip
        assert out["content"] == "42"


def test_force_prompt_tool_is_gated_and_never_deferred(server: McpServerConfig) -> None:
    reg = ToolRegistry()
    with McpCatalog([server]) as cat:
        cat.refresh_tools("srv-1")
        sync_mcp_tools_to_registry(reg, cat)
    wipe = reg.get(wire_name("srv-1", "Demo Server", "wipe"))
    assert wipe is not None and wipe.defer == "never" and wipe.is_approval_gated()
    assert wipe.name not in should_defer(reg.entries(), 10)


def test_sync_is_idempotent_and_drops_stale(ctx: ToolContext) -> None:
    tools = [McpToolSpec("a", "A."), McpToolSpec("b", "B.")]

    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        return list(tools)

    reg = ToolRegistry()
    cat = McpCatalog([McpServerConfig("s", "S", "unused")], lister=lister)
    cat.refresh_tools("s")
    first = sync_mcp_tools_to_registry(reg, cat)
    assert sync_mcp_tools_to_registry(reg, cat) == first and len(reg.names()) == 2
    tools.pop()
    cat.refresh_tools("s")
    sync_mcp_tools_to_registry(reg, cat)
    assert reg.names() == [wire_name("s", "S", "a")]


def test_selected_ids_register_only_exact_selection() -> None:
    async def lister(s: McpServerConfig) -> list[McpToolSpec]:
        return [McpToolSpec("a", ""), McpToolSpec("b", "")]

    reg = ToolRegistry()
    cat = McpCatalog([McpServerConfig("s", "S", "unused")], lister=lister)
    cat.refresh_tools("s")
    assert sync_mcp_tools_to_registry(reg, cat, {"s:b"}) == [wire_name("s", "S", "b")]
    entry: Any = reg.get(wire_name("s", "S", "b"))
    assert "description" not in entry.definition()["function"]


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
def test_a_hanging_mcp_call_ends_with_its_callers_cancel_or_deadline(
    ctx: ToolContext, stop: str
) -> None:
    entered, abandoned = threading.Event(), threading.Event()

    async def hanging(s: McpServerConfig, tool: str, args: dict[str, Any]) -> Any:
        entered.set()
        try:
            await asyncio.Event().wait()  # a server that never answers
        except asyncio.CancelledError:
            abandoned.set()
            raise

    async def listing(s: McpServerConfig) -> list[McpToolSpec]:
        return [McpToolSpec("slow", "Slow.")]

    reg = ToolRegistry()
    cat = McpCatalog([McpServerConfig("h", "Hang", "unused")], lister=listing, caller=hanging)
    cat.refresh_tools("h")
    sync_mcp_tools_to_registry(reg, cat)
    name = wire_name("h", "Hang", "slow")
    if stop == "cancel":  # the caller cancels once the request is in flight
        def cancel_once_in_flight() -> None:
            if entered.wait(60):
                ctx.cancel.set()

        threading.Thread(target=cancel_once_in_flight).start()
    else:
        ctx.deadline = time.monotonic()  # already reached
    out = json.loads(handle_function_call(name, {}, ctx=ctx, registry=reg, hooks=HookRegistry()))
    assert out["status"] == ("cancelled" if stop == "cancel" else "timeout")
    # The request itself was abandoned, not left running.
    if stop == "cancel":
        assert entered.is_set() and abandoned.wait(60)
    else:
        assert not entered.is_set() or abandoned.wait(60)


BULKY_SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent
app = MCPServer("bulky")

@app.tool()
def big(n: int) -> str:
    """n bytes of text."""
    return "x" * n

@app.tool()
def picture() -> ImageContent:
    """An image."""
    return ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")

if __name__ == "__main__":
    app.run()
'''


def test_real_server_results_are_bounded_and_say_what_is_not_text(
    tmp_path: Path, ctx: ToolContext
) -> None:
    """A server's answer reaches the model within the output limit, as a terminal's does
    (it answered 2x100 kB here: the text and its structured copy), and content that is
    no text is named, not dropped without a word."""
    script = tmp_path / "bulky.py"
    script.write_text(BULKY_SERVER)
    server = McpServerConfig(id="b", name="Bulky", command=sys.executable, args=(str(script),))
    ctx.output_limit = 4096
    reg = ToolRegistry()
    with McpCatalog([server]) as cat:
        sync_mcp_tools_to_registry(reg, cat)
        cat.wait_idle()
        sync_mcp_tools_to_registry(reg, cat)

        def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            raw = handle_function_call(wire_name("b", "Bulky", tool), args, ctx=ctx, registry=reg,
                                       hooks=HookRegistry())  # fmt: skip
            parsed: dict[str, Any] = json.loads(raw)
            return parsed

        big, small = call("big", {"n": 100_000}), call("big", {"n": 5})
        picture = call("picture", {})
    assert big["truncated"] is True and "structured" not in big
    assert "[sbx: 95" in big["content"] and "bytes of output omitted]" in big["content"]
    assert len(big["content"].encode()) < 4096 + 100
    assert small == {"content": "xxxxx", "structured": {"result": "xxxxx"}}
    assert picture["content"] == (
        "[sbx: image content (image/png) left out: only text reaches the model]"
    )
