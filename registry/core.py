"""The tool registry: tools register themselves; dispatch validates, runs and wraps.

A tool is a name, a toolset, a model-facing JSON schema and a handler. The
handler receives validated arguments (a pydantic model when the tool declares
one, else the raw dict) and a :class:`~registry.context.ToolContext`, and
returns a JSON-serialisable value or a JSON string. :meth:`ToolRegistry.dispatch`
never raises: every failure becomes ``{"error": ...}``.

Contracts:

* ``schema["description"]`` is what the model sees. ``description=`` only fills
  :attr:`ToolEntry.description` (registry metadata) and falls back to the
  schema's; a definition never gains a description its schema lacks.
* Registering a name already held by a tool of a *different* toolset is refused
  (error log, ``None`` returned) unless ``override=True``. A plugin replacing a
  built-in additionally needs ``plugins.entries.<plugin_id>.allow_tool_override:
  true`` in the operator's parsed config mapping (:meth:`ToolRegistry.configure`).
* ``check_fn`` results are cached per :meth:`get_definitions` call; a check that
  raises means "unavailable".

Namespaces, ``defer``, ``applies`` and approval gates are consumed by
:mod:`registry.deferral` and :mod:`registry.meta_tools`.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .async_bridge import run_async
from .context import ToolContext
from .results import to_json, tool_error

log = logging.getLogger(__name__)

Handler = Callable[[Any, ToolContext], Any]
DeferMode = Literal["never", "always", "auto"]
ApprovalGate = bool | Callable[[Mapping[str, Any]], bool]
RepairFn = Callable[[str, Any, str, dict[str, Any]], Any]
"""``repair(tool_name, raw_args, error_message, schema) -> new args | None``."""

_DEFER_MODES = ("never", "always", "auto")


@dataclass(slots=True)
class ToolEntry:
    """One registered tool.

    ``namespace`` is the ownership key (``terminal``, ``mcp:<server_id>``) and is
    never shown to the model; ``namespace_label`` is what ``tool_search`` groups
    by and shows (defaults to ``namespace``). ``search_description`` is the one
    line ``tool_search`` lists (defaults to the first line of ``description``).
    """

    name: str
    toolset: str
    schema: dict[str, Any]
    handler: Handler
    args_model: type[BaseModel] | None = None
    check_fn: Callable[[], bool] | None = None
    requires_env: list[str] = field(default_factory=list)
    is_async: bool = False
    description: str = ""
    emoji: str = ""
    namespace: str = ""
    namespace_label: str = ""
    search_description: str = ""
    defer: DeferMode = "never"
    applies: Callable[[Any], bool] | None = None
    approval_gated: ApprovalGate = False
    plugin_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-calling definition the model sees (schema as registered)."""
        return {"type": "function", "function": {"name": self.name, **self.schema}}

    @property
    def model_description(self) -> str:
        """The model-facing description: the schema's, never the metadata fallback."""
        return str(self.schema.get("description", ""))

    @property
    def parameters(self) -> dict[str, Any]:
        """The input JSON schema (``{"type": "object"}`` when the tool declares none)."""
        params = self.schema.get("parameters")
        return params if isinstance(params, dict) else {"type": "object", "properties": {}}

    def is_approval_gated(self, args: Mapping[str, Any] | None = None) -> bool:
        """Whether calling with ``args`` needs approval; a gate that raises counts as gated."""
        gate = self.approval_gated
        if not callable(gate):
            return bool(gate)
        try:
            return bool(gate(args or {}))
        except Exception as exc:  # fail closed: an unknown answer must not bypass approval
            log.warning("approval gate of %s raised %s; treating as gated", self.name, exc)
            return True


class ToolRegistry:
    """A set of tools keyed by name. Thread-safe for registration and dispatch."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self._tools: dict[str, ToolEntry] = {}
        self._lock = threading.Lock()
        self._config: Mapping[str, Any] = config or {}

    def configure(self, config: Mapping[str, Any] | None) -> None:
        """Install the operator's parsed config.yaml mapping (parsed once, not per call)."""
        self._config = config or {}

    def plugin_may_override(self, plugin_id: str) -> bool:
        """``plugins.entries.<plugin_id>.allow_tool_override`` is literally ``true``."""
        plugins = self._config.get("plugins") or {}
        entries = plugins.get("entries") if isinstance(plugins, Mapping) else None
        entry = entries.get(plugin_id) if isinstance(entries, Mapping) else None
        return isinstance(entry, Mapping) and entry.get("allow_tool_override") is True

    def register(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Handler,
        *,
        args_model: type[BaseModel] | None = None,
        check_fn: Callable[[], bool] | None = None,
        requires_env: list[str] | None = None,
        is_async: bool = False,
        description: str | None = None,
        emoji: str | None = "",
        override: bool = False,
        namespace: str | None = None,
        namespace_label: str | None = None,
        search_description: str | None = None,
        defer: DeferMode = "never",
        applies: Callable[[Any], bool] | None = None,
        approval_gated: ApprovalGate = False,
        plugin_id: str | None = None,
        **extra: Any,
    ) -> ToolEntry | None:
        """Add a tool; returns the entry, or ``None`` when the registration was refused.

        Re-registering a name within the same toolset replaces it (module reloads).
        """
        if defer not in _DEFER_MODES:
            raise ValueError(f"defer must be one of {_DEFER_MODES}, not {defer!r}")
        meta = description or str(schema.get("description", ""))
        ns = namespace or toolset
        entry = ToolEntry(
            name=name,
            toolset=toolset,
            schema=schema,
            handler=handler,
            args_model=args_model,
            check_fn=check_fn,
            requires_env=list(requires_env or []),
            # a coroutine function is async whatever the flag says: never hand a coroutine back
            is_async=is_async or inspect.iscoroutinefunction(handler),
            description=meta,
            emoji=emoji or "",
            namespace=ns,
            namespace_label=namespace_label or ns,
            search_description=search_description or (meta.strip().splitlines() or [""])[0],
            defer=defer,
            applies=applies,
            approval_gated=approval_gated,
            plugin_id=plugin_id,
            extra=dict(extra),
        )
        with self._lock:
            existing = self._tools.get(name)
            if existing is not None and existing.toolset != toolset:
                if not override:
                    log.error(
                        "tool %r of toolset %r would shadow the one of toolset %r; refused",
                        name, toolset, existing.toolset,
                    )  # fmt: skip
                    return None
                builtin = existing.plugin_id is None
                if plugin_id is not None and builtin and not self.plugin_may_override(plugin_id):
                    log.error(
                        "plugin %r may not override built-in tool %r: set "
                        "plugins.entries.%s.allow_tool_override: true in config.yaml",
                        plugin_id, name, plugin_id,
                    )  # fmt: skip
                    return None
            self._tools[name] = entry
        return entry

    def unregister(self, name: str) -> bool:
        """Remove ``name``; whether it was present."""
        with self._lock:
            return self._tools.pop(name, None) is not None

    def get(self, name: str) -> ToolEntry | None:
        """The entry registered as ``name``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def entries(self) -> list[ToolEntry]:
        """All entries, sorted by name."""
        return [self._tools[n] for n in sorted(self._tools)]

    def toolsets(self) -> set[str]:
        """Toolset names that currently hold at least one tool."""
        return {e.toolset for e in list(self._tools.values())}

    def select_active(self, scope: Any = None) -> list[ToolEntry]:
        """Entries whose ``applies(scope)`` holds, by name; a raising predicate = inactive."""
        out = []
        for entry in self.entries():
            if entry.applies is not None:
                try:
                    if not entry.applies(scope):
                        continue
                except Exception as exc:
                    log.warning("applies() of %s raised %s; tool inactive", entry.name, exc)
                    continue
            out.append(entry)
        return out

    def requirements(self) -> dict[str, list[str]]:
        """``requires_env`` per tool, for display (tools without requirements omitted)."""
        return {e.name: list(e.requires_env) for e in self.entries() if e.requires_env}

    def available_names(
        self, names: set[str] | None = None, cache: dict[Any, bool] | None = None
    ) -> list[str]:
        """Sorted names whose ``check_fn`` passes; ``cache`` shares results across tools."""
        checks = {} if cache is None else cache
        out = []
        for name in sorted(self._tools):
            if names is not None and name not in names:
                continue
            if check_passes(self._tools[name].check_fn, checks):
                out.append(name)
        return out

    def get_definitions(self, names: set[str] | None = None) -> list[dict[str, Any]]:
        """Definitions of available tools (``check_fn`` passing), optionally only ``names``."""
        return [self._tools[n].definition() for n in self.available_names(names)]

    def dispatch(
        self, name: str, args: Any, ctx: ToolContext, *, repair: RepairFn | None = None
    ) -> str:
        """Run tool ``name`` with ``args`` (a dict or a JSON string); always a JSON string back.

        ``repair`` gets exactly one chance to fix arguments that are not JSON or fail
        validation; an unknown tool name is never repaired.
        """
        entry = self._tools.get(name)
        if entry is None:
            return tool_error(f"Unknown tool: {name!r}", available=self.names())
        validated = _validate(entry, args)
        if isinstance(validated, _Invalid) and repair is not None:
            from .repair import attempt_repair  # local: repair is optional and rarely used

            fixed = attempt_repair(repair, entry, args, validated.message)
            if fixed is not None:
                validated = _validate(entry, fixed)
        if isinstance(validated, _Invalid):
            return validated.error
        try:
            result = entry.handler(validated.value, ctx)
            if entry.is_async or inspect.isawaitable(result):
                result = run_async(result)
        except Exception as exc:
            log.warning("tool %s failed: %s: %s", name, type(exc).__name__, exc)
            return tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
        return result if isinstance(result, str) else to_json(result)


def check_passes(check_fn: Callable[[], bool] | None, cache: dict[Any, bool]) -> bool:
    """Run ``check_fn`` once per ``cache``; exceptions mean unavailable (fail safe)."""
    if check_fn is None:
        return True
    if check_fn not in cache:
        try:
            cache[check_fn] = bool(check_fn())
        except Exception as exc:
            log.debug("check %r raised %s; unavailable", check_fn, exc)
            cache[check_fn] = False
    return cache[check_fn]


@dataclass(slots=True)
class _Valid:
    value: Any


@dataclass(slots=True)
class _Invalid:
    message: str
    error: str


def _validate(entry: ToolEntry, args: Any) -> _Valid | _Invalid:
    """Parse and validate ``args`` for ``entry``."""
    parsed = _parse_args(args)
    if isinstance(parsed, _Invalid):
        return parsed
    if entry.args_model is None:
        return _Valid(parsed)
    try:
        return _Valid(entry.args_model.model_validate(parsed))
    except ValidationError as exc:
        msg = f"Invalid arguments for {entry.name}: {_describe(exc)}"
        return _Invalid(msg, tool_error(msg))


def _parse_args(args: Any) -> dict[str, Any] | _Invalid:
    """The arguments as a dict, or why not."""
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, UnicodeDecodeError) as exc:
            msg = f"Arguments are not valid JSON: {exc}"
            return _Invalid(msg, tool_error(msg))
    if args is None:
        return {}
    if not isinstance(args, dict):
        msg = f"Arguments must be a JSON object, not {type(args).__name__}"
        return _Invalid(msg, tool_error(msg))
    return args


def _describe(exc: ValidationError) -> str:
    """One line per problem: ``field: message``."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


registry = ToolRegistry()
"""The process-wide registry built-in tools register into."""


def register(
    name: str,
    toolset: str,
    schema: dict[str, Any],
    handler: Handler,
    check_fn: Callable[[], bool] | None = None,
    requires_env: list[str] | None = None,
    is_async: bool = False,
    description: str | None = None,
    emoji: str | None = None,
    override: bool = False,
    **extra: Any,
) -> ToolEntry | None:
    """Register into the process-wide :data:`registry` (as :meth:`ToolRegistry.register`).

    ``extra`` passes the deferral fields (``namespace``, ``defer``, ``applies``,
    ``approval_gated``, ...) and ``args_model`` through to :meth:`ToolRegistry.register`.
    """
    return registry.register(
        name, toolset, schema, handler,
        check_fn=check_fn, requires_env=requires_env, is_async=is_async,
        description=description, emoji=emoji, override=override, **extra,
    )  # fmt: skip
