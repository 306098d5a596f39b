"""The tool registry: tools register themselves; dispatch validates, runs and wraps.

A tool is a name, a toolset, a model-facing JSON schema and a handler. The
handler receives validated arguments (a pydantic model when the tool declares
one, else the raw dict) and a :class:`~registry.context.ToolContext`, and
returns a JSON-serialisable value or a JSON string. :meth:`ToolRegistry.dispatch`
never raises: every failure becomes ``{"error": ...}``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .context import ToolContext
from .results import to_json, tool_error

log = logging.getLogger(__name__)

Handler = Callable[[Any, ToolContext], Any]


@dataclass(slots=True)
class ToolEntry:
    """One registered tool."""

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

    def definition(self) -> dict[str, Any]:
        """The OpenAI function-calling definition the model sees."""
        return {"type": "function", "function": {"name": self.name, **self.schema}}


class ToolRegistry:
    """A set of tools keyed by name. Thread-safe for registration and dispatch."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolEntry] = {}
        self._lock = threading.Lock()

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
        emoji: str = "",
        override: bool = False,
    ) -> ToolEntry | None:
        """Add a tool. Shadowing a tool of another toolset is refused unless ``override``.

        Returns the new entry, or ``None`` when the registration was refused.
        """
        entry = ToolEntry(
            name=name,
            toolset=toolset,
            schema=schema,
            handler=handler,
            args_model=args_model,
            check_fn=check_fn,
            requires_env=list(requires_env or []),
            is_async=is_async,
            description=description or str(schema.get("description", "")),
            emoji=emoji,
        )
        with self._lock:
            existing = self._tools.get(name)
            if existing and existing.toolset != toolset and not override:
                log.error(
                    "tool %r of toolset %r would shadow the one of toolset %r; refused",
                    name, toolset, existing.toolset,
                )  # fmt: skip
                return None
            self._tools[name] = entry
        return entry

    def get(self, name: str) -> ToolEntry | None:
        """The entry registered as ``name``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def get_definitions(self, names: set[str] | None = None) -> list[dict[str, Any]]:
        """Definitions of available tools (``check_fn`` passing), optionally limited to ``names``."""
        checks: dict[Callable[[], bool], bool] = {}
        out = []
        for name in sorted(self._tools):
            entry = self._tools[name]
            if names is not None and name not in names:
                continue
            if entry.check_fn is not None:
                if entry.check_fn not in checks:
                    try:
                        checks[entry.check_fn] = bool(entry.check_fn())
                    except Exception:
                        checks[entry.check_fn] = False
                if not checks[entry.check_fn]:
                    continue
            out.append(entry.definition())
        return out

    def dispatch(self, name: str, args: Any, ctx: ToolContext) -> str:
        """Run tool ``name`` with ``args`` (a dict or a JSON string); always a JSON string back."""
        entry = self._tools.get(name)
        if entry is None:
            return tool_error(f"Unknown tool: {name!r}", available=self.names())
        parsed = _parse_args(args)
        if isinstance(parsed, str):
            return parsed
        validated: Any = parsed
        if entry.args_model is not None:
            try:
                validated = entry.args_model.model_validate(parsed)
            except ValidationError as exc:
                return tool_error(f"Invalid arguments for {name}: {_describe(exc)}")
        try:
            result = entry.handler(validated, ctx)
        except Exception as exc:
            log.warning("tool %s failed: %s: %s", name, type(exc).__name__, exc)
            return tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
        return result if isinstance(result, str) else to_json(result)


def _parse_args(args: Any) -> dict[str, Any] | str:
    """The arguments as a dict, or a JSON error string."""
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, UnicodeDecodeError) as exc:
            return tool_error(f"Arguments are not valid JSON: {exc}")
    if args is None:
        return {}
    if not isinstance(args, dict):
        return tool_error(f"Arguments must be a JSON object, not {type(args).__name__}")
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
