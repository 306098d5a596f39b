"""Registry overhead: definitions and dispatch with 200 tools vs calling the handler directly.

    python -m bench.bench_registry [--n 5000]

Paths measured (one run, p50/p95 in ms): the handler called directly (baseline),
``ToolRegistry.dispatch``, ``handle_function_call`` (no hooks, then one pre and
one post hook), a pydantic-validated tool through ``handle_function_call``,
``get_tool_definitions`` over all 200 tools, and ``apply_defer_exposition``.
Target: ``handle_function_call`` adds < 50 us p50 per dispatch.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, cast

from pydantic import BaseModel

from bench.stats import measure, report
from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.deferral import apply_defer_exposition
from registry.dispatch import handle_function_call
from registry.hooks import HookRegistry
from registry.toolsets import get_tool_definitions

N_TOOLS = 200


class Args(BaseModel):
    q: str
    limit: int = 3


def handler(args: Any, ctx: ToolContext) -> dict[str, Any]:
    return {"ok": True}


def build() -> ToolRegistry:
    reg = ToolRegistry()
    shared_check = lambda: True  # noqa: E731  (one check shared by many tools: runs once)
    for i in range(N_TOOLS):
        reg.register(
            f"tool_{i:03d}", f"set_{i % 10}",
            {"description": f"Tool number {i}. " * 20, "parameters": {
                "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
            handler, check_fn=shared_check if i % 2 else None, defer="auto",
        )  # fmt: skip
    reg.register("typed", "set_0", {"description": "typed"}, handler, args_model=Args)
    return reg


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    n = parser.parse_args().n
    reg = build()
    ctx = ToolContext(session_id="s", call_id="c", backend="local", pool=cast(Any, None))
    args = {"q": "x"}
    no_hooks, with_hooks = HookRegistry(), HookRegistry()
    with_hooks.register_hook("pre_tool_call", lambda **kw: None)
    with_hooks.register_hook("post_tool_call", lambda **kw: None)

    direct = measure("handler direct + to_json", lambda: json.dumps(handler(args, ctx)), n)
    timings = [
        direct,
        measure("registry.dispatch", lambda: reg.dispatch("tool_150", args, ctx), n),
        measure("handle_function_call", lambda: handle_function_call(
            "tool_150", args, ctx=ctx, registry=reg, hooks=no_hooks), n),
        measure("handle_function_call + 2 hooks", lambda: handle_function_call(
            "tool_150", args, ctx=ctx, registry=reg, hooks=with_hooks), n),
        measure("handle_function_call JSON str", lambda: handle_function_call(
            "tool_150", '{"q": "x"}', ctx=ctx, registry=reg, hooks=no_hooks), n),
        measure("handle_function_call pydantic", lambda: handle_function_call(
            "typed", args, ctx=ctx, registry=reg, hooks=no_hooks), n),
    ]  # fmt: skip
    defs = get_tool_definitions(quiet_mode=True, registry=reg)
    slow_n = max(50, n // 20)
    timings += [
        measure(f"get_tool_definitions ({len(defs)} tools)",
                lambda: get_tool_definitions(quiet_mode=True, registry=reg), slow_n),
        measure("apply_defer_exposition", lambda: apply_defer_exposition(defs, reg, 128_000),
                slow_n),
    ]  # fmt: skip
    print(report(timings, direct))
    print()
    for t in timings[1:6]:
        print(f"added per dispatch, {t.name}: {(t.p50 - direct.p50) * 1000:.1f} us p50, "
              f"{(t.p95 - direct.p95) * 1000:.1f} us p95")  # fmt: skip
    added = (timings[2].p50 - direct.p50) * 1000
    print(f"target < 50 us p50 added by handle_function_call: {'met' if added < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
