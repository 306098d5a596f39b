"""should_defer's rule and worked examples, apply_defer_exposition, the prompt section."""

from __future__ import annotations

from typing import Any

from registry.context import ToolContext
from registry.core import ToolEntry, ToolRegistry
from registry.deferral import (
    apply_defer_exposition,
    deferred_tools_prompt,
    estimate_tokens,
    select_active,
    should_defer,
)
from registry.meta_tools import META_TOOL_NAMES


def h(a: Any, c: ToolContext) -> str:
    return "ok"


def entry(name: str, desc_len: int, defer: str = "auto", **kw: Any) -> ToolEntry:
    return ToolEntry(name=name, toolset="ts", schema={"description": "d" * desc_len}, handler=h,
                     defer=defer, **kw)  # type: ignore[arg-type]  # fmt: skip


def make_reg(n: int, desc_len: int, defer: str = "auto", label: str = "web") -> ToolRegistry:
    reg = ToolRegistry()
    for i in range(n):
        reg.register(f"tool_{i:02d}", "ts", {"description": "d" * desc_len}, h,
                     defer=defer, namespace_label=label)  # type: ignore[arg-type]  # fmt: skip
    return reg


def test_estimate_is_ceil_of_chars_over_four() -> None:
    e = ToolEntry(name="ab", toolset="t", schema={"description": "xyz", "parameters": {}},
                  handler=h)  # fmt: skip
    assert estimate_tokens(e) == 2  # ceil((2 + 3 + 2) / 4)


def test_worked_example_five_8000_char_tools_in_32k_all_deferred() -> None:
    entries = [entry(f"t{i}", 8000) for i in range(5)]
    assert should_defer(entries, 32_000) == {f"t{i}" for i in range(5)}


def test_worked_example_one_50000_char_tool_stays_inline() -> None:
    assert should_defer([entry("big", 50_000)], 32_000) == set()


def test_worked_example_five_320_char_tools_in_4k_stay_inline() -> None:
    entries = [
        ToolEntry(
            name=f"tool_0{i}", toolset="t", schema={"description": "d" * 320, "parameters": {}},
            handler=h, defer="auto",
        )
        for i in range(5)
    ]  # per tool: "tool_0i" (7) + 320 + "{}" (2) = 329 chars -> 83 tokens
    cost = sum(estimate_tokens(e) for e in entries)
    assert cost == 415  # > threshold 400, but not > the meta-tools' 500
    assert should_defer(entries, 4_000) == set()


def test_unknown_or_zero_window_means_32000() -> None:
    entries = [entry(f"t{i}", 2_800) for i in range(5)]  # ~3,500 tokens: > 3,200
    assert should_defer(entries, None) == should_defer(entries, 0) == {f"t{i}" for i in range(5)}
    assert should_defer(entries, 100_000) == set()


def test_always_deferred_and_never_kept() -> None:
    entries = [entry("a", 10, "always"), entry("n", 90_000, "never")]
    assert should_defer(entries, 32_000) == {"a"}


def test_auto_pool_is_all_or_nothing() -> None:
    entries = [entry(f"t{i}", 8000) for i in range(4)] + [entry("small", 1)]
    assert should_defer(entries, 32_000) == {"t0", "t1", "t2", "t3", "small"}


def test_approval_gated_never_deferred() -> None:
    entries = [entry(f"t{i}", 8000) for i in range(5)]
    entries += [entry("gated", 10, "always", approval_gated=True),
                entry("gated2", 8000, approval_gated=lambda a: 1 / 0)]  # fmt: skip
    out = should_defer(entries, 32_000)
    assert "gated" not in out and "gated2" not in out and len(out) == 5


def test_select_active_function() -> None:
    reg = make_reg(2, 10)
    reg.register("aa", "ts", {}, h, applies=lambda s: False)
    assert [e.name for e in select_active(reg, None)] == ["tool_00", "tool_01"]


def test_apply_without_deferral_leaves_tools_alone() -> None:
    reg = make_reg(2, 10)
    tools = reg.get_definitions()
    exp = apply_defer_exposition(tools, reg, 32_000)
    out, deferred = exp
    assert out == tools and deferred == [] and exp.meta is None
    assert exp.system_prompt_section() == ""


def test_apply_strips_deferred_and_injects_three_meta_tools() -> None:
    reg = make_reg(5, 8000)
    reg.register("inline", "ts", {"description": "x"}, h)
    out, deferred = apply_defer_exposition(reg.get_definitions(), reg, 32_000)
    assert [d["function"]["name"] for d in out] == ["inline", *META_TOOL_NAMES]
    assert [e.name for e in deferred] == [f"tool_{i:02d}" for i in range(5)]
    assert "tool_exec" not in {d["function"]["name"] for d in out}


def test_prompt_section_inventories_namespaces_and_counts() -> None:
    entries = [entry("a", 1, namespace_label="web"), entry("b", 1, namespace_label="web"),
               entry("c", 1, namespace_label="mcp:Files")]  # fmt: skip
    text = deferred_tools_prompt(entries)
    assert "- mcp:Files: 1 tool\n" in text and "- web: 2 tools" in text
    assert text.startswith("<DEFERRED_TOOLS>") and "tool_search" in text
