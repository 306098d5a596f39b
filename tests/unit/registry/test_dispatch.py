"""handle_function_call: agent-loop tools, hooks, error wrapping, async bridging, repair."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from pydantic import BaseModel

from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.dispatch import AGENT_LOOP_TOOLS, handle_function_call
from registry.hooks import HookRegistry
from tests.unit.registry.helpers import schema


def call(reg: ToolRegistry, ctx: ToolContext, name: str, args: Any = None,
         hooks: HookRegistry | None = None, **kw: Any) -> dict[str, Any]:  # fmt: skip
    out = handle_function_call(name, args or {}, "task", "user", ctx=ctx, registry=reg,
                               hooks=hooks or HookRegistry(), **kw)  # fmt: skip
    assert isinstance(out, str)
    result: dict[str, Any] = json.loads(out)
    return result


def test_agent_loop_tools_answer_with_clear_error(reg: ToolRegistry, ctx: ToolContext) -> None:
    for name in AGENT_LOOP_TOOLS:
        reg.register(name, "agent", schema(), lambda a, c: "should not run")
        out = call(reg, ctx, name)
        assert "agent loop" in out["error"]


def test_pre_hook_can_block(reg: ToolRegistry, ctx: ToolContext) -> None:
    ran: list[int] = []

    def handler(args: object, ctx: object) -> str:
        ran.append(1)
        return "ok"

    reg.register("t", "ts", schema(), handler)
    hooks = HookRegistry()
    hooks.register_hook("pre_tool_call", lambda **kw: {"block": True, "reason": "policy says no"})
    out = call(reg, ctx, "t", hooks=hooks)
    assert out["blocked"] is True and "policy says no" in out["error"] and not ran


def test_pre_hook_that_raises_blocks(reg: ToolRegistry, ctx: ToolContext) -> None:
    def bad(**kw: Any) -> None:
        raise RuntimeError("guard down")

    reg.register("t", "ts", schema(), lambda a, c: {"ok": 1})
    hooks = HookRegistry()
    hooks.register_hook("pre_tool_call", bad)
    assert "guard down" in call(reg, ctx, "t", hooks=hooks)["error"]


def test_pre_hook_allows_and_post_hook_sees_result(reg: ToolRegistry, ctx: ToolContext) -> None:
    seen: list[dict[str, Any]] = []
    reg.register("t", "ts", schema(), lambda a, c: {"ok": a["x"]})
    hooks = HookRegistry()
    hooks.register_hook("pre_tool_call", lambda **kw: seen.append(kw))
    hooks.register_hook("post_tool_call", lambda **kw: seen.append(kw))
    assert call(reg, ctx, "t", {"x": 1}, hooks=hooks) == {"ok": 1}
    assert seen[0]["name"] == "t" and seen[0]["task_id"] == "task"
    assert seen[1]["result"] == '{"ok": 1}'


def test_post_hook_failure_does_not_change_result(reg: ToolRegistry, ctx: ToolContext) -> None:
    def bad(**kw: Any) -> None:
        raise RuntimeError("observer broke")

    reg.register("t", "ts", schema(), lambda a, c: {"ok": 1})
    hooks = HookRegistry()
    hooks.register_hook("post_tool_call", bad)
    assert call(reg, ctx, "t", hooks=hooks) == {"ok": 1}


def test_inner_error_wrapping(reg: ToolRegistry, ctx: ToolContext) -> None:
    def bad(a: Any, c: ToolContext) -> Any:
        raise ValueError("inner")

    reg.register("t", "ts", schema(), bad)
    assert call(reg, ctx, "t")["error"] == "Tool execution failed: ValueError: inner"


def test_outer_error_wrapping(ctx: ToolContext) -> None:
    class Broken(ToolRegistry):
        def dispatch(self, *a: Any, **kw: Any) -> str:
            raise RuntimeError("registry broke")

    out = call(Broken(), ctx, "t")
    assert out["error"] == "Error executing t: registry broke"


def test_non_serialisable_result_still_json(reg: ToolRegistry, ctx: ToolContext) -> None:
    reg.register("t", "ts", schema(), lambda a, c: {"obj": object()})
    assert "object" in call(reg, ctx, "t")["obj"]


async def _async_handler(args: Any, ctx: ToolContext) -> dict[str, Any]:
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    return {"loop": id(loop), "thread": threading.get_ident()}


def test_async_persistent_loop_without_running_loop(reg: ToolRegistry, ctx: ToolContext) -> None:
    reg.register("a", "ts", schema(), _async_handler, is_async=True)
    first, second = call(reg, ctx, "a"), call(reg, ctx, "a")
    assert first["loop"] == second["loop"]  # same persistent loop keeps cached clients alive
    assert first["thread"] == threading.get_ident()


def test_async_inside_running_loop_uses_disposable_thread(reg: ToolRegistry,
                                                          ctx: ToolContext) -> None:  # fmt: skip
    reg.register("a", "ts", schema(), _async_handler)  # detected as coroutine function

    async def main() -> dict[str, Any]:
        return call(reg, ctx, "a")

    out = asyncio.run(main())
    assert out["thread"] != threading.get_ident()


def test_async_worker_threads_get_their_own_persistent_loop(reg: ToolRegistry,
                                                            ctx: ToolContext) -> None:  # fmt: skip
    reg.register("a", "ts", schema(), _async_handler, is_async=True)
    results: dict[str, list[dict[str, Any]]] = {}
    barrier = threading.Barrier(2)  # both threads alive at once: idents and loops not reused

    def worker(key: str) -> None:
        barrier.wait()
        results[key] = [call(reg, ctx, "a"), call(reg, ctx, "a")]
        barrier.wait()

    threads = [threading.Thread(target=worker, args=(k,)) for k in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    x, y = results["x"], results["y"]
    assert x[0]["loop"] == x[1]["loop"] and y[0]["loop"] == y[1]["loop"]
    assert x[0]["thread"] == x[1]["thread"] != y[0]["thread"]


def test_async_handler_exception_wrapped(reg: ToolRegistry, ctx: ToolContext) -> None:
    async def bad(a: Any, c: ToolContext) -> Any:
        raise OSError("async boom")

    reg.register("a", "ts", schema(), bad, is_async=True)
    assert call(reg, ctx, "a")["error"] == "Tool execution failed: OSError: async boom"


class N(BaseModel):
    n: int


def test_repair_gets_one_chance(reg: ToolRegistry, ctx: ToolContext) -> None:
    attempts: list[Any] = []

    def repair(name: str, raw: Any, error: str, params: dict[str, Any]) -> Any:
        attempts.append((name, raw, error))
        return {"n": 5}

    reg.register("t", "ts", schema(), lambda a, c: {"n": a.n}, args_model=N)
    assert call(reg, ctx, "t", '{"n": "five"', repair=repair) == {"n": 5}
    assert len(attempts) == 1 and "not valid JSON" in attempts[0][2]


def test_repair_failing_again_returns_error_without_second_try(
    reg: ToolRegistry, ctx: ToolContext
) -> None:
    attempts: list[int] = []

    def repair(*a: Any) -> Any:
        attempts.append(1)
        return {"n": "still wrong"}

    reg.register("t", "ts", schema(), lambda a, c: {"n": a.n}, args_model=N)
    assert "Invalid arguments" in call(reg, ctx, "t", {"n": "x"}, repair=repair)["error"]
    assert attempts == [1]


def test_repair_never_applied_to_unknown_tool(reg: ToolRegistry, ctx: ToolContext) -> None:
    attempts: list[int] = []

    def repair(*args: object) -> dict[str, object]:
        attempts.append(1)
        return {}

    out = call(reg, ctx, "nope", {}, repair=repair)
    assert "Unknown tool" in out["error"] and attempts == []


def test_repair_that_raises_keeps_original_error(reg: ToolRegistry, ctx: ToolContext) -> None:
    def repair(*a: Any) -> Any:
        raise RuntimeError("llm down")

    reg.register("t", "ts", schema(), lambda a, c: {"n": a.n}, args_model=N)
    assert "Invalid arguments" in call(reg, ctx, "t", {"n": "x"}, repair=repair)["error"]


def test_valid_args_never_reach_repair(reg: ToolRegistry, ctx: ToolContext) -> None:
    reg.register("t", "ts", schema(), lambda a, c: {"n": a.n}, args_model=N)
    assert call(reg, ctx, "t", {"n": 1}, repair=lambda *a: 1 / 0) == {"n": 1}


def test_a_gated_tool_called_directly_asks_for_approval(
    reg: ToolRegistry, ctx: ToolContext
) -> None:
    from registry.approval import ApprovalGuard

    ran: list[dict[str, object]] = []

    def handler(args: dict[str, object], c: object) -> str:
        ran.append(args)
        return json.dumps({"deployed": True})

    reg.register("deploy", "ops", schema(), handler, approval_gated=True)
    guard = ApprovalGuard.from_config_file(None)
    ctx.components["approval"] = guard
    refused = call(reg, ctx, "deploy", {"target": "prod"})
    assert refused["status"] == "approval_required" and ran == []
    assert refused["pattern_key"] == "gated_tool:deploy"
    guard.approve(refused["approval_id"], "once", session_id=ctx.session_id)
    assert call(reg, ctx, "deploy", {"target": "prod"}) == {"deployed": True}
    assert ran == [{"target": "prod"}]
    # Once means once: the next call asks again.
    assert call(reg, ctx, "deploy", {"target": "prod"})["status"] == "approval_required"
