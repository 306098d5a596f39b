"""Registration rules, definitions and check_fn behaviour of ToolRegistry."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from registry import core
from registry.context import ToolContext
from registry.core import ToolRegistry
from tests.unit.registry.helpers import schema


def echo(args: Any, ctx: ToolContext) -> Any:
    return {"args": args}


def test_register_creates_entry_with_metadata(reg: ToolRegistry) -> None:
    e = reg.register("t", "ts", schema("Model text."), echo, requires_env=["K"], emoji="x")
    assert e is not None and reg.get("t") is e
    assert (e.toolset, e.requires_env, e.emoji, e.namespace, e.namespace_label) == (
        "ts", ["K"], "x", "ts", "ts")  # fmt: skip


def test_description_falls_back_to_schema(reg: ToolRegistry) -> None:
    e = reg.register("t", "ts", schema("From schema.\nMore."), echo)
    assert e is not None and e.description == "From schema.\nMore."
    assert e.search_description == "From schema."


def test_description_never_copied_into_schema(reg: ToolRegistry) -> None:
    reg.register("t", "ts", schema(None), echo, description="metadata only")
    (d,) = reg.get_definitions()
    assert "description" not in d["function"]
    assert reg.get("t").description == "metadata only"  # type: ignore[union-attr]


def test_schema_description_wins_when_both_differ(reg: ToolRegistry) -> None:
    reg.register("t", "ts", schema("model sees this"), echo, description="registry sees this")
    (d,) = reg.get_definitions()
    assert d["function"]["description"] == "model sees this"


def test_shadowing_other_toolset_refused(reg: ToolRegistry, caplog: Any) -> None:
    reg.register("t", "a", schema(), echo)
    with caplog.at_level(logging.ERROR):
        assert reg.register("t", "b", schema(), echo) is None
    assert reg.get("t").toolset == "a"  # type: ignore[union-attr]
    assert "shadow" in caplog.text


def test_shadowing_with_override_allowed(reg: ToolRegistry) -> None:
    reg.register("t", "a", schema(), echo)
    assert reg.register("t", "b", schema(), echo, override=True) is not None
    assert reg.get("t").toolset == "b"  # type: ignore[union-attr]


def test_same_toolset_reregistration_replaces(reg: ToolRegistry) -> None:
    reg.register("t", "a", schema("one"), echo)
    assert reg.register("t", "a", schema("two"), echo) is not None
    assert reg.get("t").model_description == "two"  # type: ignore[union-attr]


def test_plugin_override_of_builtin_needs_operator_opt_in(reg: ToolRegistry) -> None:
    reg.register("t", "builtin", schema(), echo)
    assert reg.register("t", "plug", schema(), echo, override=True, plugin_id="p1") is None
    reg.configure({"plugins": {"entries": {"p1": {"allow_tool_override": True}}}})
    assert reg.register("t", "plug", schema(), echo, override=True, plugin_id="p1") is not None


def test_plugin_override_opt_in_must_be_literal_true(reg: ToolRegistry) -> None:
    reg.configure({"plugins": {"entries": {"p1": {"allow_tool_override": "yes"}}}})
    reg.register("t", "builtin", schema(), echo)
    assert reg.register("t", "plug", schema(), echo, override=True, plugin_id="p1") is None


def test_module_level_register_uses_process_registry(monkeypatch: Any) -> None:
    private = ToolRegistry()
    monkeypatch.setattr(core, "registry", private)
    e = core.register("t", "ts", schema(), echo, None, ["ENV"], False, "meta", "e", False,
                      defer="auto")  # fmt: skip
    assert e is not None and private.get("t") is e and e.defer == "auto"


def test_invalid_defer_mode_rejected(reg: ToolRegistry) -> None:
    with pytest.raises(ValueError):
        reg.register("t", "ts", schema(), echo, defer="sometimes")  # type: ignore[arg-type]


def test_check_fn_false_hides_tool(reg: ToolRegistry) -> None:
    reg.register("a", "ts", schema(), echo, check_fn=lambda: False)
    reg.register("b", "ts", schema(), echo)
    assert [d["function"]["name"] for d in reg.get_definitions()] == ["b"]


def test_check_fn_exception_means_unavailable(reg: ToolRegistry) -> None:
    def boom() -> bool:
        raise RuntimeError("no")

    reg.register("a", "ts", schema(), echo, check_fn=boom)
    assert reg.get_definitions() == []


def test_shared_check_runs_once_per_get_definitions(reg: ToolRegistry) -> None:
    calls = []

    def check() -> bool:
        calls.append(1)
        return True

    for n in "abc":
        reg.register(n, "ts", schema(), echo, check_fn=check)
    reg.get_definitions()
    assert len(calls) == 1
    reg.get_definitions()
    assert len(calls) == 2  # cached per call, not forever: availability can change


def test_requirements_reported_for_display(reg: ToolRegistry) -> None:
    reg.register("a", "ts", schema(), echo, requires_env=["API_KEY"])
    reg.register("b", "ts", schema(), echo)
    assert reg.requirements() == {"a": ["API_KEY"]}


def test_approval_gate_bool_callable_and_raising(reg: ToolRegistry) -> None:
    def bad(_: Any) -> bool:
        raise RuntimeError("?")

    a = reg.register("a", "ts", schema(), echo, approval_gated=True)
    b = reg.register("b", "ts", schema(), echo, approval_gated=lambda args: bool(args.get("x")))
    c = reg.register("c", "ts", schema(), echo, approval_gated=bad)
    assert a and b and c
    assert a.is_approval_gated() and not b.is_approval_gated({}) and b.is_approval_gated({"x": 1})
    assert c.is_approval_gated()


def test_select_active_sorted_and_raising_predicate_inactive(reg: ToolRegistry,
                                                             caplog: Any) -> None:  # fmt: skip
    def raises(scope: Any) -> bool:
        raise RuntimeError("bad")

    reg.register("zeta", "ts", schema(), echo)
    reg.register("alpha", "ts", schema(), echo, applies=lambda s: s.get("web", False))
    reg.register("mid", "ts", schema(), echo, applies=raises)
    with caplog.at_level(logging.WARNING):
        assert [e.name for e in reg.select_active({"web": True})] == ["alpha", "zeta"]
    assert "mid" in caplog.text
    assert [e.name for e in reg.select_active({})] == ["zeta"]


class Args(BaseModel):
    n: int
    flag: bool = False


def test_dispatch_validates_with_args_model(reg: ToolRegistry, ctx: ToolContext) -> None:
    reg.register("t", "ts", schema(), lambda a, c: {"n": a.n, "flag": a.flag}, args_model=Args)
    assert reg.dispatch("t", '{"n": 2}', ctx) == '{"n": 2, "flag": false}'
    assert "Invalid arguments for t" in reg.dispatch("t", {"n": "x"}, ctx)


def test_dispatch_unknown_tool_and_bad_json(reg: ToolRegistry, ctx: ToolContext) -> None:
    assert "Unknown tool" in reg.dispatch("nope", {}, ctx)
    reg.register("t", "ts", schema(), echo)
    assert "not valid JSON" in reg.dispatch("t", "{", ctx)
    assert "must be a JSON object" in reg.dispatch("t", "[1]", ctx)


def test_dispatch_wraps_handler_exception(reg: ToolRegistry, ctx: ToolContext) -> None:
    def bad(a: Any, c: ToolContext) -> Any:
        raise KeyError("k")

    reg.register("t", "ts", schema(), bad)
    assert reg.dispatch("t", {}, ctx) == '{"error": "Tool execution failed: KeyError: \'k\'"}'
