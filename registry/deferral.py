"""Deferred tool exposition: which tools to keep out of the prompt, and how.

``should_defer(entries, context_window)``:

* threshold = 10% of the context window; an unknown or 0 window counts as
  32,000 tokens (threshold 3,200);
* ``defer="always"`` entries are deferred;
* the ``defer="auto"`` pool is deferred all or nothing, only when its estimated
  cost exceeds the threshold AND it holds at least 5 tools
  (:data:`MIN_AUTO_DEFER_COUNT`: below that, search-then-invoke costs more turns
  than it saves) AND its cost exceeds 500 tokens
  (:data:`META_TOOLS_OVERHEAD_TOKENS`: the meta-tools' own prompt cost; without
  this gate small tool sets in small windows pay net-negative tokens);
* approval-gated tools are never deferred (only an inline call reaches the
  approval gate), whatever their mode.

Cost estimate per tool = ceil((len(name) + len(model-facing description) +
len(json.dumps(parameters schema))) / 4).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .context import ToolContext
from .core import ToolEntry, ToolRegistry
from .meta_tools import META_TOOL_DEFINITIONS, MetaToolSession
from .toolsets import get_tool_definitions

DEFAULT_CONTEXT_WINDOW = 32_000
THRESHOLD_RATIO = 0.10
MIN_AUTO_DEFER_COUNT = 5
META_TOOLS_OVERHEAD_TOKENS = 500


def estimate_tokens(entry: ToolEntry) -> int:
    """The prompt cost of inlining ``entry`` (chars / 4, rounded up)."""
    chars = len(entry.name) + len(entry.model_description) + len(json.dumps(entry.parameters))
    return math.ceil(chars / 4)


def defer_threshold(context_window: int | None) -> float:
    """10% of the window; 32,000 tokens assumed when unknown or not positive."""
    window = context_window if context_window and context_window > 0 else DEFAULT_CONTEXT_WINDOW
    return window * THRESHOLD_RATIO


def should_defer(entries: Iterable[ToolEntry], context_window: int | None) -> set[str]:
    """Names of the entries to defer (see module doc for the exact rule)."""
    deferred: set[str] = set()
    auto: list[ToolEntry] = []
    for e in entries:
        if e.defer == "never" or e.is_approval_gated():
            continue
        if e.defer == "always":
            deferred.add(e.name)
        else:
            auto.append(e)
    cost = sum(estimate_tokens(e) for e in auto)
    if (
        cost > defer_threshold(context_window)
        and len(auto) >= MIN_AUTO_DEFER_COUNT
        and cost > META_TOOLS_OVERHEAD_TOKENS
    ):
        deferred.update(e.name for e in auto)
    return deferred


def select_active(registry: ToolRegistry, scope: Any = None) -> list[ToolEntry]:
    """Entries active for ``scope`` (``applies`` holds), sorted by name."""
    return registry.select_active(scope)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, str):
        return tool
    return str(tool["function"]["name"] if "function" in tool else tool["name"])


@dataclass
class DeferExposition:
    """Result of :func:`apply_defer_exposition`; unpacks as ``(tools, deferred)``.

    ``meta`` runs the injected meta-tools for this request (``None`` when nothing
    was deferred); :meth:`dispatch` routes a call to the meta-tools or the registry.
    """

    tools: list[Any]
    deferred: list[ToolEntry]
    meta: MetaToolSession | None
    registry: ToolRegistry

    def __iter__(self) -> Iterator[Any]:
        return iter((self.tools, self.deferred))

    def dispatch(self, name: str, args: Any, ctx: ToolContext, **kwargs: Any) -> str:
        """Run ``name``: a meta-tool of this request, else ``handle_function_call``."""
        if self.meta is not None and self.meta.handles(name):
            return self.meta.dispatch(name, args, ctx)
        from .dispatch import handle_function_call  # local: dispatch is the higher layer

        return handle_function_call(name, args, ctx=ctx, registry=self.registry, **kwargs)

    def system_prompt_section(self) -> str:
        """The ``<DEFERRED_TOOLS>`` section ('' when nothing was deferred)."""
        return deferred_tools_prompt(self.deferred)


def apply_defer_exposition(
    tools: list[Any], registry: ToolRegistry, context_window: int | None
) -> DeferExposition:
    """Strip deferred tools from ``tools`` and inject the three meta-tools.

    ``tools`` are OpenAI definitions (or names); tools unknown to ``registry`` stay
    inline. When nothing is deferred, ``tools`` comes back unchanged and no
    meta-tool is added.
    """
    entries = [e for e in (registry.get(_tool_name(t)) for t in tools) if e is not None]
    names = should_defer(entries, context_window)
    if not names:
        return DeferExposition(list(tools), [], None, registry)
    kept = [t for t in tools if _tool_name(t) not in names]
    deferred = sorted((e for e in entries if e.name in names), key=lambda e: e.name)
    from .dispatch import handle_function_call  # local: dispatch is the higher layer

    def invoke(name: str, params: dict[str, Any], ctx: ToolContext) -> str:
        # through handle_function_call, so pre/post hooks also see deferred calls
        return handle_function_call(name, params, ctx=ctx, registry=registry)

    inline = [_tool_name(t) for t in kept]
    session = MetaToolSession(registry, deferred, invoke=invoke, inline=inline)
    meta_defs = META_TOOL_DEFINITIONS if not tools or not isinstance(tools[0], str) else [
        d["function"]["name"] for d in META_TOOL_DEFINITIONS]  # fmt: skip
    return DeferExposition([*kept, *meta_defs], deferred, session, registry)


def deferred_tools_prompt(entries: Iterable[ToolEntry]) -> str:
    """A system-prompt section inventorying deferred namespaces and tool counts."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.namespace_label] = counts.get(e.namespace_label, 0) + 1
    if not counts:
        return ""
    lines = [f"- {label}: {n} tool{'s' if n != 1 else ''}" for label, n in sorted(counts.items())]
    return (
        "<DEFERRED_TOOLS>\n"
        "More tools are available than are listed. Find them with tool_search, read one "
        "with tool_inspect, then call it with tool_invoke.\n"
        + "\n".join(lines)
        + "\n</DEFERRED_TOOLS>"
    )


def expose_tools(
    registry: ToolRegistry,
    *,
    toolsets: Iterable[str] | None = None,
    scope: Any = None,
    context_window: int | None = None,
) -> DeferExposition:
    """The tools a request offers the model: the definitions of ``toolsets`` (all when
    None) whose ``applies(scope)`` holds, with deferred exposition applied when the
    model's ``context_window`` is given (without one nothing is deferred)."""
    definitions = get_tool_definitions(
        enabled_toolsets=toolsets, quiet_mode=True, registry=registry
    )
    active = {e.name for e in registry.select_active(scope)}
    definitions = [d for d in definitions if d["function"]["name"] in active]
    if context_window is None:
        return DeferExposition(definitions, [], None, registry)
    return apply_defer_exposition(definitions, registry, context_window)
