"""Toolsets: named bundles of tools, composites, platform presets, legacy names.

A toolset is resolved to tool names recursively: its own ``tools`` plus every
toolset it ``includes``. Resolution is cycle-safe (a toolset already on the path
contributes nothing again). A name that is not a static toolset resolves to the
tools registered under that toolset name (dynamic toolsets, e.g. MCP servers).
Legacy ``*_tools`` names map to their modern tool names.

:func:`get_tool_definitions` takes five steps:

1. ``enabled_toolsets`` given: only tools of those toolsets.
2. else ``disabled_toolsets`` given: all toolsets minus the disabled ones' tools.
3. neither: all known toolsets (static and those registered tools declare).
4. registry filtering: ``check_fn`` (cached per call; exceptions = unavailable).
5. schema patching: no description may point at an unavailable tool.

Patching rule (step 5): a *mention* of tool ``t`` is ```t``` (backticked) or, when
``t`` contains an underscore, the bare word ``t``. Plain words are not matched so
that an unavailable ``memory`` tool does not strip a sentence about RAM. Every
sentence of a tool's description (and of its parameters' descriptions) that
mentions a known-but-unavailable tool is removed; schemas are copied, never
mutated in place.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .core import ToolRegistry
from .core import registry as default_registry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Toolset:
    """A named bundle: its own tools plus the toolsets it includes."""

    name: str
    description: str
    tools: tuple[str, ...] = ()
    includes: tuple[str, ...] = ()


TOOLSETS: dict[str, Toolset] = {}
LEGACY_TOOLSET_MAP: dict[str, tuple[str, ...]] = {
    "terminal_tools": ("terminal", "process"),
    "process_tools": ("process",),
}


def define_toolset(
    name: str, description: str, tools: Iterable[str] = (), includes: Iterable[str] = ()
) -> Toolset:
    """Add or replace a static toolset."""
    ts = Toolset(name, description, tuple(tools), tuple(includes))
    TOOLSETS[name] = ts
    return ts


define_toolset("terminal", "Shell commands in the session sandbox", ["terminal"])
define_toolset("process", "Background process management", ["process"])
define_toolset("files", "Text files in the session sandbox", ["read_file", "write_file"])
define_toolset("agent", "Agent-loop tools (run by the agent loop, not the worker)",
               ["todo_list", "memory", "session_search", "delegate_task"])  # fmt: skip
define_toolset(
    "sandbox", "Everything a sandbox session needs", includes=["terminal", "process", "files"]
)
# Platform presets: what each front door exposes by default.
define_toolset("sbx-worker", "Preset: tools the Celery worker serves", includes=["sandbox"])
define_toolset("sbx-cli", "Preset: the sbx CLI", includes=["sandbox"])
define_toolset("sbx-mcp", "Preset: tools exposed over MCP", includes=["sandbox"])
PLATFORM_PRESETS = ("sbx-worker", "sbx-cli", "sbx-mcp")


def resolve_toolset(
    name: str,
    registry: ToolRegistry = default_registry,
    toolsets: dict[str, Toolset] | None = None,
    _path: frozenset[str] = frozenset(),
    _index: dict[str, set[str]] | None = None,
) -> set[str]:
    """Tool names of ``name``, composites expanded; unknown names resolve to ``set()``."""
    table = TOOLSETS if toolsets is None else toolsets
    index = _toolset_index(registry) if _index is None else _index
    if name in _path:
        log.debug("toolset cycle through %s ignored", name)
        return set()
    if name in LEGACY_TOOLSET_MAP and name not in table:
        return set(LEGACY_TOOLSET_MAP[name])
    ts = table.get(name)
    out: set[str] = set()
    if ts is not None:
        out.update(ts.tools)
        for inc in ts.includes:
            out |= resolve_toolset(inc, registry, table, _path | {name}, index)
    # registered tools declare their toolset: dynamic toolsets and additions to static ones
    out |= index.get(name, set())
    return out


def _toolset_index(registry: ToolRegistry) -> dict[str, set[str]]:
    """Registered tool names by toolset (built once per resolution pass)."""
    index: dict[str, set[str]] = {}
    for e in registry.entries():
        index.setdefault(e.toolset, set()).add(e.name)
    return index


def all_toolset_names(
    registry: ToolRegistry = default_registry, toolsets: dict[str, Toolset] | None = None
) -> set[str]:
    """Every known toolset: static ones and those that registered tools declare."""
    table = TOOLSETS if toolsets is None else toolsets
    return set(table) | registry.toolsets()


def is_toolset_available(
    name: str, registry: ToolRegistry = default_registry, toolsets: dict[str, Toolset] | None = None
) -> bool:
    """Whether at least one registered tool of ``name`` passes its ``check_fn``."""
    names = resolve_toolset(name, registry, toolsets) & set(registry.names())
    return bool(registry.available_names(names))


def get_tool_definitions(
    enabled_toolsets: Iterable[str] | None = None,
    disabled_toolsets: Iterable[str] | None = None,
    quiet_mode: bool = False,
    registry: ToolRegistry = default_registry,
    toolsets: dict[str, Toolset] | None = None,
) -> list[dict[str, Any]]:
    """Model-facing definitions (OpenAI function format), sorted by name; see module doc."""
    table = TOOLSETS if toolsets is None else toolsets
    known = all_toolset_names(registry, table) | set(LEGACY_TOOLSET_MAP)
    wanted: set[str] = set()
    index = _toolset_index(registry)
    if enabled_toolsets is not None:
        for ts in enabled_toolsets:
            if ts not in known and not quiet_mode:
                log.warning("unknown toolset %r ignored", ts)
            wanted |= resolve_toolset(ts, registry, table, _index=index)
    else:
        for ts in all_toolset_names(registry, table):
            wanted |= resolve_toolset(ts, registry, table, _index=index)
        for ts in disabled_toolsets or ():
            wanted -= resolve_toolset(ts, registry, table, _index=index)
    available = registry.available_names(wanted)
    entries = [registry.get(n) for n in available]
    definitions = [e.definition() for e in entries if e is not None]
    mentionable = (wanted | set(registry.names()) | _static_tools(table)) - set(available)
    pattern = _mention_pattern(mentionable)  # built once per call, not per tool
    if pattern is not None:
        definitions = [patch_definition(d, mentionable, pattern) for d in definitions]
    if not quiet_mode:
        log.info("tools exposed: %s", ", ".join(available) or "(none)")
    return definitions


def _static_tools(table: dict[str, Toolset]) -> set[str]:
    return {t for ts in table.values() for t in ts.tools}


def _mention_pattern(unavailable: Iterable[str]) -> re.Pattern[str] | None:
    alts = []
    for name in sorted(unavailable, key=len, reverse=True):
        esc = re.escape(name)
        alts.append(f"`{esc}`")
        if "_" in name:
            alts.append(rf"(?<![\w`]){esc}(?![\w`])")
    return re.compile("|".join(alts)) if alts else None


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _strip_mentions(text: str, pattern: re.Pattern[str]) -> str:
    if not pattern.search(text):
        return text
    kept = [s for s in _SENTENCE.split(text) if not pattern.search(s)]
    return " ".join(kept)


def patch_definition(
    definition: dict[str, Any], unavailable: set[str], pattern: re.Pattern[str] | None = None
) -> dict[str, Any]:
    """``definition`` with every sentence mentioning an ``unavailable`` tool removed.

    ``pattern`` is :func:`_mention_pattern` of ``unavailable`` when the caller has it.
    """
    fn = definition["function"]
    unavailable = unavailable - {fn["name"]}
    pattern = _mention_pattern(unavailable) if pattern is None else pattern
    if pattern is None or not unavailable:
        return definition
    texts = [fn.get("description", "")]
    props = (fn.get("parameters") or {}).get("properties") or {}
    texts += [p.get("description", "") for p in props.values() if isinstance(p, dict)]
    # plain substring test first: the regex (with look-arounds) is 10x slower and rarely needed
    if not any(isinstance(t, str) and n in t for t in texts for n in unavailable):
        return definition
    if not any(isinstance(t, str) and pattern.search(t) for t in texts):
        return definition  # the common case: no copy
    patched = copy.deepcopy(definition)
    pfn = patched["function"]
    if "description" in pfn:
        pfn["description"] = _strip_mentions(pfn["description"], pattern)
    for prop in ((pfn.get("parameters") or {}).get("properties") or {}).values():
        if isinstance(prop, dict) and isinstance(prop.get("description"), str):
            prop["description"] = _strip_mentions(prop["description"], pattern)
    return patched


@dataclass(slots=True)
class ToolsetInfo:
    """A toolset for display: tools, availability and env requirements."""

    name: str
    tools: list[str]
    available: bool
    requires_env: list[str] = field(default_factory=list)


def describe_toolsets(registry: ToolRegistry = default_registry) -> list[ToolsetInfo]:
    """Every known toolset with its registered tools, availability and ``requires_env``."""
    out = []
    for name in sorted(all_toolset_names(registry)):
        tools = sorted(resolve_toolset(name, registry) & set(registry.names()))
        env = sorted({v for t in tools for v in (registry.get(t) or _NoEntry).requires_env})
        out.append(ToolsetInfo(name, tools, is_toolset_available(name, registry), env))
    return out


class _NoEntry:
    requires_env: list[str] = []
