"""tool_search / tool_inspect / tool_invoke behaviour for one request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.deferral import DeferExposition, apply_defer_exposition
from registry.hooks import hooks

PARAMS = {"type": "object", "properties": {
    "q": {"type": "string"}, "limit": {"type": "integer", "default": 3},
    "mode": {"type": "string", "enum": ["a", "b"]}}, "required": ["q"]}  # fmt: skip


def handler(args: Any, ctx: ToolContext) -> dict[str, Any]:
    return {"got": args}


def build() -> tuple[ToolRegistry, DeferExposition]:
    reg = ToolRegistry()
    pad = "x" * 8000
    specs = [("web_search", "web", "Search The Web."), ("web_fetch", "web", "Fetch a URL."),
             ("kb_search", "kb", "Search knowledge."), ("kb_list", "kb", "List bases."),
             ("zz_misc", "misc", "Misc.")]  # fmt: skip
    for name, label, line in specs:
        reg.register(name, "ts", {"description": f"{line} {pad}", "parameters": PARAMS}, handler,
                     defer="auto", namespace=f"own:{label}", namespace_label=label,
                     search_description=line)  # fmt: skip
    reg.register("gated", "ts", {"description": "g"}, handler, approval_gated=True)
    reg.register("outside", "other", {"description": "o"}, handler, defer="always")
    tools = [d for d in reg.get_definitions() if d["function"]["name"] != "outside"]
    return reg, apply_defer_exposition(tools, reg, 32_000)


def run(exp: DeferExposition, ctx: ToolContext, meta: str, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(exp.dispatch(meta, args, ctx))
    return out


def test_search_case_insensitive_grouped_alphabetical(ctx: ToolContext) -> None:
    _, exp = build()
    out = run(exp, ctx, "tool_search", query="SEARCH")
    assert out["count"] == 2
    assert [g["namespace"] for g in out["namespaces"]] == ["kb", "web"]
    assert out["namespaces"][0]["tools"][0] == {"name": "kb_search",
                                                "description": "Search knowledge."}  # fmt: skip


def test_search_by_namespace_label_never_shows_ownership_key(ctx: ToolContext) -> None:
    _, exp = build()
    out = run(exp, ctx, "tool_search", namespace="WEB")
    assert [t["name"] for t in out["namespaces"][0]["tools"]] == ["web_fetch", "web_search"]
    assert "own:" not in json.dumps(out)


def test_search_only_covers_deferred_tools(ctx: ToolContext) -> None:
    _, exp = build()
    names = [t["name"] for g in run(exp, ctx, "tool_search")["namespaces"] for t in g["tools"]]
    assert "gated" not in names and "outside" not in names and len(names) == 5


def test_invoke_requires_inspection_then_retry_succeeds(ctx: ToolContext) -> None:
    _, exp = build()
    first = run(exp, ctx, "tool_invoke", name="kb_list", params={"q": "x"})
    assert "Inspect kb_list" in first["error"]
    assert first["signature"].startswith("kb_list(q: string")
    second = run(exp, ctx, "tool_invoke", name="kb_list", params={"q": "x"})
    assert second == {"got": {"q": "x", "limit": 3}}  # defaults applied


def test_inspect_marks_inspected_and_shows_signature(ctx: ToolContext) -> None:
    _, exp = build()
    out = run(exp, ctx, "tool_inspect", name="web_fetch")
    assert out["signature"] == (
        "web_fetch(q: string, limit?: integer = 3, mode?: string) - Fetch a URL.")
    assert run(exp, ctx, "tool_invoke", name="web_fetch", params={"q": "u"})["got"]["q"] == "u"


def test_verbose_search_counts_as_inspecting(ctx: ToolContext) -> None:
    _, exp = build()
    out = run(exp, ctx, "tool_search", query="misc", verbose=True)
    assert out["namespaces"][0]["tools"][0]["parameters"] == PARAMS
    assert "got" in run(exp, ctx, "tool_invoke", name="zz_misc", params={"q": "1"})


def test_inspected_set_is_per_request(ctx: ToolContext) -> None:
    reg, exp = build()
    run(exp, ctx, "tool_inspect", name="kb_list")
    exp2 = apply_defer_exposition(exp.tools[:0] + [d for d in reg.get_definitions()
                                  if d["function"]["name"] != "outside"], reg, 32_000)  # fmt: skip
    assert "Inspect" in run(exp2, ctx, "tool_invoke", name="kb_list", params={"q": "1"})["error"]


@pytest.mark.parametrize(("name", "needle"), [
    ("nope", "Unknown tool"), ("outside", "not available in this request"),
    ("gated", "needs approval"),
])  # fmt: skip
def test_invoke_refusals(ctx: ToolContext, name: str, needle: str) -> None:
    _, exp = build()
    assert needle in run(exp, ctx, "tool_invoke", name=name, params={})["error"]


def test_invoke_refuses_gate_that_depends_on_params(ctx: ToolContext) -> None:
    reg, exp = build()
    entry = reg.get("kb_list")
    assert entry is not None
    entry.approval_gated = lambda a: a.get("q") == "rm"
    run(exp, ctx, "tool_inspect", name="kb_list")
    assert "needs approval" in run(exp, ctx, "tool_invoke", name="kb_list",
                                   params={"q": "rm"})["error"]  # fmt: skip


def test_invoke_invalid_params(ctx: ToolContext) -> None:
    _, exp = build()
    run(exp, ctx, "tool_inspect", name="kb_list")
    out = run(exp, ctx, "tool_invoke", name="kb_list", params={"limit": "3", "mode": "c"})
    assert "q: required" in out["error"] and "limit: expected integer" in out["error"]
    assert "mode: must be one of" in out["error"] and "signature" in out


def test_invoke_goes_through_hooks(ctx: ToolContext) -> None:
    _, exp = build()

    def block(**kw: Any) -> str | None:
        return "no kb" if kw["name"] == "kb_list" else None

    hooks.register_hook("pre_tool_call", block)
    try:
        run(exp, ctx, "tool_inspect", name="kb_list")
        assert "no kb" in run(exp, ctx, "tool_invoke", name="kb_list", params={"q": "1"})["error"]
    finally:
        hooks.unregister_hook("pre_tool_call", block)


def test_inline_tool_via_invoke_is_told_to_call_directly(ctx: ToolContext) -> None:
    reg, exp = build()
    assert exp.meta is not None
    exp.meta.inline.add("web_x")
    reg.register("web_x", "ts", {"description": "x"}, handler)
    out = run(exp, ctx, "tool_inspect", name="web_x")
    assert "call it directly" in out["error"]
