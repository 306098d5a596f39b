"""``handle_function_call``: the model's tool call in, a JSON string out, always.

Flow: agent-loop tools are refused with a clear error (they need the
agent's own state and must be handled by the agent loop before dispatch) ->
``pre_tool_call`` hooks (may block) -> :meth:`ToolRegistry.dispatch` ->
``post_tool_call`` hooks. Errors are wrapped twice: ``registry.dispatch`` turns a
handler exception into ``"Tool execution failed: Type: msg"``; this function wraps
everything else (a broken registry, a context that cannot be built) into
``"Error executing NAME: msg"``. A traceback never reaches the model.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from .context import ToolContext
from .core import RepairFn, ToolRegistry
from .core import registry as default_registry
from .hooks import HookRegistry
from .hooks import hooks as default_hooks
from .results import to_json, tool_error

log = logging.getLogger(__name__)

AGENT_LOOP_TOOLS = frozenset({"todo_list", "memory", "session_search", "delegate_task"})
"""Tools whose schemas may be registered but which only the agent loop can run."""

_default_pool: Any = None


def _default_context(task_id: str | None) -> ToolContext:
    """A context for embedders that call without one (one lazily built sandbox pool)."""
    global _default_pool
    if _default_pool is None:
        from environments.pool import SandboxPool  # lazy: only embedders without ctx pay

        _default_pool = SandboxPool()
    return ToolContext(
        session_id=task_id or "default",
        call_id=uuid.uuid4().hex,
        backend="local",
        pool=_default_pool,
    )


def _gate(registry: ToolRegistry, name: str, args: Any, ctx: ToolContext) -> str | None:
    """The refusal of an approval-gated tool called directly (None: it may run).

    Gated tools ask every time (checked with the actual arguments); the worker's
    approval guard answers, so an approval granted for this exact call lets its
    retry through. Without a guard (an embedder's registry) nothing is gated here.
    """
    entry = registry.get(name)
    guard = ctx.components.get("approval")
    if entry is None or guard is None:
        return None
    if not entry.is_approval_gated(args if isinstance(args, dict) else {}):
        return None
    text = args if isinstance(args, str) else json.dumps(args, sort_keys=True, default=str)
    decision = guard.check_gated_tool(name, text, session_id=ctx.session_id, backend=ctx.backend)
    refusal = decision.to_tool_result()
    return None if refusal is None else to_json(refusal)


def handle_function_call(
    name: str,
    args: Any,
    task_id: str | None = None,
    user_task: str | None = None,
    *,
    ctx: ToolContext | None = None,
    registry: ToolRegistry = default_registry,
    hooks: HookRegistry = default_hooks,
    repair: RepairFn | None = None,
) -> str:
    """Run one tool call; the result is always a JSON string.

    A blocking ``pre_tool_call`` hook yields ``{"error": ..., "blocked": true}`` and
    the tool does not run. ``post_tool_call`` hooks see the final result string.
    """
    try:
        if name in AGENT_LOOP_TOOLS:
            return tool_error(
                f"{name} must be handled by the agent loop, not dispatched to the registry",
                agent_loop_tool=True,
            )
        has_pre, has_post = hooks.has("pre_tool_call"), hooks.has("post_tool_call")
        if has_pre:
            reason = hooks.run_pre(name=name, args=args, task_id=task_id, user_task=user_task)
            if reason is not None:
                return tool_error(f"Tool call {name} blocked: {reason}", blocked=True)
        context = ctx if ctx is not None else _default_context(task_id)
        refusal = _gate(registry, name, args, context)
        if refusal is not None:
            return refusal
        result = registry.dispatch(name, args, context, repair=repair)
        if has_post:
            hooks.run_post(
                name=name, args=args, task_id=task_id, user_task=user_task, result=result
            )
        return result
    except Exception as exc:
        log.exception("dispatch of %s failed", name)
        return tool_error(f"Error executing {name}: {exc}")
