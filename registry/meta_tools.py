"""The search-then-call meta-tools injected when a request defers tools.

``tool_search`` lists deferred tools (case-insensitive filter by query and by
namespace label, alphabetical, grouped by label; ``verbose`` adds schemas and
counts as inspecting them). ``tool_inspect`` shows one tool's readable signature
and marks it inspected. ``tool_invoke`` runs a deferred tool and refuses, in this
order: unknown names; approval-gated tools (checked at call time with the actual
params, a raising gate counts as gated: the approval prompt only fires for tools
called inline); names outside this request's deferred set; tools not yet
inspected (the refusal carries the signature and marks the tool inspected, so the
retry succeeds); invalid params. Valid params, defaults applied, reach the real
handler. The inspected set lives in one :class:`MetaToolSession`, i.e. per
request. There is deliberately no code-execution meta-tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from .context import ToolContext
from .core import ToolEntry, ToolRegistry
from .results import to_json, tool_error

TOOL_SEARCH, TOOL_INSPECT, TOOL_INVOKE = "tool_search", "tool_inspect", "tool_invoke"
META_TOOL_NAMES = (TOOL_SEARCH, TOOL_INSPECT, TOOL_INVOKE)

META_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": TOOL_SEARCH,
        "description": "Search the deferred tools listed in the system prompt. Filters by a "
        "case-insensitive query over names and descriptions and by namespace. verbose=true "
        "includes parameter schemas (and counts as inspecting the tools).",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "Text to match; empty lists all."},
            "namespace": {"type": "string", "description": "Only this namespace."},
            "verbose": {"type": "boolean", "default": False},
        }, "additionalProperties": False},
    }},
    {"type": "function", "function": {
        "name": TOOL_INSPECT,
        "description": "Show a deferred tool's signature and parameters. Required before "
        "tool_invoke.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"], "additionalProperties": False},
    }},
    {"type": "function", "function": {
        "name": TOOL_INVOKE,
        "description": "Call a deferred tool by name with params matching its signature.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string"},
            "params": {"type": "object", "description": "The tool's arguments."},
        }, "required": ["name"], "additionalProperties": False},
    }},
]  # fmt: skip

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}  # fmt: skip


def _type_ok(value: Any, expected: Any) -> bool:
    kinds = expected if isinstance(expected, list) else [expected]
    for kind in kinds:
        py = _JSON_TYPES.get(kind)
        if py is None:
            return True  # an unknown type keyword: let the tool decide
        if isinstance(value, bool) and kind in ("integer", "number"):
            continue  # JSON booleans are not numbers
        if isinstance(value, py):
            return True
    return False


def validate_params(entry: ToolEntry, params: Any) -> tuple[dict[str, Any], list[str]]:
    """``params`` with defaults applied, and the problems found (empty = valid).

    Tools with a pydantic ``args_model`` are validated by it; others by a small
    JSON-schema subset: top-level ``type``, ``enum``, ``required``, ``default``,
    ``additionalProperties: false``.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return {}, [f"params must be an object, not {type(params).__name__}"]
    if entry.args_model is not None:
        try:
            model = entry.args_model.model_validate(params)
        except ValidationError as exc:
            return {}, [f"{'.'.join(map(str, e['loc'])) or '(params)'}: {e['msg']}"
                        for e in exc.errors(include_url=False)]  # fmt: skip
        return model.model_dump(mode="json", by_alias=True), []
    schema = entry.parameters
    props: dict[str, Any] = schema.get("properties") or {}
    out, problems = dict(params), []
    for key in schema.get("required") or []:
        if key not in params:
            problems.append(f"{key}: required")
    for key, value in params.items():
        spec = props.get(key)
        if spec is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"{key}: unexpected parameter")
            continue
        if "type" in spec and not _type_ok(value, spec["type"]):
            problems.append(f"{key}: expected {spec['type']}, got {type(value).__name__}")
        if "enum" in spec and value not in spec["enum"]:
            problems.append(f"{key}: must be one of {spec['enum']}")
    for key, spec in props.items():
        if key not in out and isinstance(spec, dict) and "default" in spec:
            out[key] = spec["default"]
    return out, problems


def signature(entry: ToolEntry) -> str:
    """``name(a: string, b?: integer = 3) - one line`` for the model to read."""
    schema = entry.parameters
    required = set(schema.get("required") or [])
    parts = []
    for key, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "any")
        kind = "|".join(kind) if isinstance(kind, list) else kind
        part = f"{key}{'' if key in required else '?'}: {kind}"
        if "default" in spec:
            part += f" = {json.dumps(spec['default'])}"
        parts.append(part)
    line = f"{entry.name}({', '.join(parts)})"
    return f"{line} - {entry.search_description}" if entry.search_description else line


Invoker = Callable[[str, dict[str, Any], ToolContext], str]


class MetaToolSession:
    """The meta-tools of one request: its deferred tools and its inspected set."""

    def __init__(
        self, registry: ToolRegistry, deferred: Iterable[ToolEntry],
        invoke: Invoker | None = None, inline: Iterable[str] = (),
    ) -> None:  # fmt: skip
        self.registry = registry
        self.deferred: dict[str, ToolEntry] = {e.name: e for e in deferred}
        self.inline = set(inline)
        self.inspected: set[str] = set()
        self._invoke: Invoker = invoke or registry.dispatch

    def handles(self, name: str) -> bool:
        """Whether ``name`` is one of the meta-tools."""
        return name in META_TOOL_NAMES

    def dispatch(self, name: str, args: Any, ctx: ToolContext) -> str:
        """Run meta-tool ``name``; always a JSON string."""
        try:
            if isinstance(args, str | bytes):
                args = json.loads(args) if args.strip() else {}
            if not isinstance(args, dict):
                return tool_error("Arguments must be a JSON object")
            if name == TOOL_SEARCH:
                return self.search(str(args.get("query") or ""), args.get("namespace"),
                                   bool(args.get("verbose", False)))  # fmt: skip
            if name == TOOL_INSPECT:
                return self.inspect(str(args.get("name") or ""))
            if name == TOOL_INVOKE:
                return self.invoke(str(args.get("name") or ""), args.get("params"), ctx)
            return tool_error(f"Unknown meta-tool: {name!r}")
        except Exception as exc:
            return tool_error(f"Error executing {name}: {type(exc).__name__}: {exc}")

    def search(self, query: str = "", namespace: str | None = None, verbose: bool = False) -> str:
        """Deferred tools matching ``query`` (and ``namespace`` label), grouped by label."""
        q = query.strip().lower()
        ns = namespace.strip().lower() if namespace else None
        groups: dict[str, list[dict[str, Any]]] = {}
        for name in sorted(self.deferred):
            e = self.deferred[name]
            if ns and e.namespace_label.lower() != ns:
                continue
            hay = f"{e.name}\n{e.search_description}\n{e.model_description}".lower()
            if q and q not in hay:
                continue
            item: dict[str, Any] = {"name": e.name, "description": e.search_description}
            if verbose:
                item["signature"] = signature(e)
                item["parameters"] = e.parameters
                self.inspected.add(e.name)
            groups.setdefault(e.namespace_label, []).append(item)
        result: dict[str, Any] = {
            "count": sum(len(v) for v in groups.values()),
            "namespaces": [{"namespace": k, "tools": groups[k]} for k in sorted(groups)],
        }
        if not groups:
            result["available_namespaces"] = sorted({e.namespace_label
                                                     for e in self.deferred.values()})  # fmt: skip
        return to_json(result)

    def inspect(self, name: str) -> str:
        """The tool's signature and schema; marks it inspected for this request."""
        entry = self.deferred.get(name)
        if entry is None:
            return self._not_here(name)
        self.inspected.add(name)
        return to_json({
            "name": name, "namespace": entry.namespace_label, "signature": signature(entry),
            "description": entry.model_description, "parameters": entry.parameters,
        })  # fmt: skip

    def invoke(self, name: str, params: Any, ctx: ToolContext) -> str:
        """Run deferred tool ``name`` with ``params`` after the checks in the module doc."""
        entry = self.registry.get(name)
        if entry is None:
            return tool_error(f"Unknown tool: {name!r}")
        gate_args = params if isinstance(params, dict) else {}
        if entry.is_approval_gated(gate_args):
            return tool_error(f"{name} needs approval and cannot run through {TOOL_INVOKE}; "
                              "call it directly.", approval_gated=True)  # fmt: skip
        if name not in self.deferred:
            return self._not_here(name)
        if name not in self.inspected:
            self.inspected.add(name)  # the signature below is the inspection: retry succeeds
            return tool_error(f"Inspect {name} before invoking it; its signature follows. "
                              "Call tool_invoke again with matching params.",
                              signature=signature(entry), parameters=entry.parameters)  # fmt: skip
        clean, problems = validate_params(entry, params)
        if problems:
            return tool_error(f"Invalid params for {name}: {'; '.join(problems)}",
                              signature=signature(entry))  # fmt: skip
        return self._invoke(name, clean, ctx)

    def _not_here(self, name: str) -> str:
        if name in self.inline:
            return tool_error(f"{name} is not deferred in this request; call it directly.")
        if self.registry.get(name) is None:
            return tool_error(f"Unknown tool: {name!r}")
        return tool_error(f"{name} is not available in this request.")
