"""A tool plugin as another distribution would ship it (entry point group ``sbx.tools``).

``register`` adds: ``weather`` (offered only where ``scope["weather"]`` is set),
eight ``kb_lookup_<n>`` tools that defer automatically, ``add_one`` (an integer
argument, with a repair callback that turns ``"5"`` into ``5``), a
``pre_tool_call`` hook that blocks any call whose arguments mention
``forbidden-by-plugin``, and a ``post_tool_call`` hook that appends each call's
tool name to the file named by ``$PLUGIN_HOOK_LOG``. ``override`` replaces the
built-in ``write_file`` (it needs the operator's opt-in).
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from registry.context import ToolContext
from registry.discovery import PluginRegistrar

BLOCK_WORD = "forbidden-by-plugin"


class AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    n: int


def _schema(description: str, **properties: Any) -> dict[str, Any]:
    return {
        "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": sorted(properties), "additionalProperties": False},
    }  # fmt: skip


def _lookup(n: int) -> Any:
    def handler(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"kb": n, "query": args["query"], "session": ctx.session_id}

    return handler


def _block(**call: Any) -> str | None:
    return "the plugin forbids this" if BLOCK_WORD in json.dumps(call["args"]) else None


def _log(**call: Any) -> None:
    path = os.environ.get("PLUGIN_HOOK_LOG")
    if path:
        with open(path, "a") as f:
            f.write(call["name"] + "\n")


def _repair(name: str, raw: Any, error: str, schema: dict[str, Any]) -> Any:
    args = json.loads(raw) if isinstance(raw, str) else raw
    if name == "add_one" and isinstance(args, dict) and str(args.get("n", "")).isdigit():
        return {"n": int(args["n"])}
    return None


def register(r: PluginRegistrar) -> None:
    r.register("weather", "demo", _schema("Today's weather.", city={"type": "string"}),
               lambda a, c: {"sky": "clear"}, applies=lambda scope: bool(scope.get("weather")))
    for n in range(8):
        r.register(
            f"kb_lookup_{n}", "kb",
            _schema(f"Look up an answer in knowledge base number {n}. " + "Detail. " * 60,
                    query={"type": "string", "description": "What to look up."}),
            _lookup(n), defer="auto", namespace="kb",
        )  # fmt: skip
    r.register("add_one", "demo", _schema("Add one.", n={"type": "integer"}),
               lambda a, c: {"result": a.n + 1}, args_model=AddArgs)  # fmt: skip
    r.register_hook("pre_tool_call", _block)
    r.register_hook("post_tool_call", _log)
    r.register_repair(_repair)


def override(r: PluginRegistrar) -> None:
    r.register("write_file", "plugin-files", _schema("A plugin's write_file."),
               lambda a, c: {"by": "plugin"}, override=True)  # fmt: skip
