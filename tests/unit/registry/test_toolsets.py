"""Toolset resolution, get_tool_definitions' five steps, availability, schema patching."""

from __future__ import annotations

from typing import Any

from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.toolsets import (
    Toolset,
    get_tool_definitions,
    is_toolset_available,
    resolve_toolset,
)
from tests.unit.registry.helpers import schema


def h(a: Any, c: ToolContext) -> str:
    return "ok"


TABLE = {
    "web": Toolset("web", "", ("web_search", "web_fetch")),
    "files": Toolset("files", "", ("read_file",)),
    "combo": Toolset("combo", "", (), ("web", "files")),
    "loop_a": Toolset("loop_a", "", ("read_file",), ("loop_b",)),
    "loop_b": Toolset("loop_b", "", ("web_fetch",), ("loop_a",)),
    "preset": Toolset("preset", "", (), ("combo",)),
}


def make() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("web_search", "web", schema("Search."), h)
    reg.register("web_fetch", "web", schema("Fetch."), h)
    reg.register("read_file", "files", schema("Read."), h)
    reg.register("terminal", "terminal", schema("Shell."), h)
    return reg


def names(defs: list[dict[str, Any]]) -> list[str]:
    return [d["function"]["name"] for d in defs]


def test_composite_resolves_recursively() -> None:
    assert resolve_toolset("preset", make(), TABLE) == {"web_search", "web_fetch", "read_file"}


def test_cyclic_composites_terminate() -> None:
    assert resolve_toolset("loop_a", make(), TABLE) == {"read_file", "web_fetch"}


def test_legacy_tools_name_mapped() -> None:
    assert resolve_toolset("terminal_tools", make(), TABLE) == {"terminal", "process"}


def test_dynamic_toolset_from_registry() -> None:
    reg = make()
    reg.register("mcp__srv__x", "mcp-srv", schema(), h)
    assert resolve_toolset("mcp-srv", reg, TABLE) == {"mcp__srv__x"}


def test_step1_enabled_only() -> None:
    defs = get_tool_definitions(["web"], quiet_mode=True, registry=make(), toolsets=TABLE)
    assert names(defs) == ["web_fetch", "web_search"]


def test_step2_disabled_subtracted_from_all() -> None:
    defs = get_tool_definitions(None, ["web"], quiet_mode=True, registry=make(), toolsets=TABLE)
    assert names(defs) == ["read_file", "terminal"]


def test_step3_neither_means_all() -> None:
    defs = get_tool_definitions(quiet_mode=True, registry=make(), toolsets=TABLE)
    assert names(defs) == ["read_file", "terminal", "web_fetch", "web_search"]


def test_step4_check_fn_filters_and_runs_once() -> None:
    reg = make()
    runs: list[int] = []

    def check() -> bool:
        runs.append(1)
        return False

    reg.register("x_one", "x", schema(), h, check_fn=check)
    reg.register("x_two", "x", schema(), h, check_fn=check)
    defs = get_tool_definitions(quiet_mode=True, registry=reg, toolsets=TABLE)
    assert "x_one" not in names(defs) and runs == [1]


def test_step5_schema_patched_to_drop_unavailable_tool_mentions() -> None:
    reg = make()
    reg.register("browser", "b", schema(
        "Open a page. Use `web_search` first to find URLs. Then read it with read_file."), h)
    defs = get_tool_definitions(["b", "files"], quiet_mode=True, registry=reg, toolsets=TABLE)
    desc = {d["function"]["name"]: d["function"]["description"] for d in defs}["browser"]
    assert desc == "Open a page. Then read it with read_file."
    assert "web_search" in reg.get("browser").model_description  # type: ignore[union-attr]


def test_step5_plain_words_are_not_mentions() -> None:
    reg = make()
    reg.register("memory", "agent", schema(), h, check_fn=lambda: False)
    reg.register("shell", "s", schema("Uses little memory. Fast."), h)
    defs = get_tool_definitions(["s"], quiet_mode=True, registry=reg, toolsets=TABLE)
    assert defs[0]["function"]["description"] == "Uses little memory. Fast."


def test_step5_parameter_descriptions_patched() -> None:
    reg = make()
    reg.register("t", "t", schema("T.", q={"type": "string",
                 "description": "Query. Pass results of web_fetch here."}), h)  # fmt: skip
    defs = get_tool_definitions(["t"], quiet_mode=True, registry=reg, toolsets=TABLE)
    assert defs[0]["function"]["parameters"]["properties"]["q"]["description"] == "Query."


def test_is_toolset_available() -> None:
    reg = make()
    reg.register("g", "gone", schema(), h, check_fn=lambda: False)
    assert is_toolset_available("web", reg, TABLE)
    assert not is_toolset_available("gone", reg, TABLE)
    assert not is_toolset_available("unknown", reg, TABLE)


def test_default_tables_resolve_worker_preset() -> None:
    assert resolve_toolset("sbx-worker", make()) >= {"terminal", "process"}
