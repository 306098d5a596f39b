"""The tools an MCP client sees, and what it gets back from a call.

Definitions are the model-facing ones ``sbx tools`` prints (OpenAI function format):
the registry's built-in tools and, from the shared snapshot ``$SBX_HOME/mcp-cache.json``,
the tools of the MCP servers the workers aggregate (never connecting to them here).
A call's result is one text content holding exactly the tool-result JSON; it is
flagged ``isError`` when the call did not run (an ``error`` and no exit code).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from registry.results import tool_error
from worker.settings import Settings


def load_definitions(settings: Settings, toolsets: Sequence[str] | None) -> list[dict[str, Any]]:
    """The model-facing definitions of ``toolsets`` (all when None), as ``sbx tools``."""
    from registry.core import registry
    from registry.discovery import discover_builtin_tools
    from registry.mcp import sync_mcp_tools_to_registry
    from registry.toolsets import get_tool_definitions

    discover_builtin_tools()
    if settings.mcp_servers:
        from worker.service.mcp import open_offline_catalog

        sync_mcp_tools_to_registry(registry, open_offline_catalog(settings))
    enabled = list(toolsets) if toolsets else None
    return get_tool_definitions(enabled_toolsets=enabled, quiet_mode=True)


class ToolCatalog:
    """The definitions, read once and again only when the MCP snapshot file changes
    (``tools/list`` and, on the 2026-07-28 HTTP wire, every call's argument check ask)."""

    def __init__(self, settings: Settings, toolsets: Sequence[str] | None) -> None:
        self.settings = settings
        self.toolsets = toolsets
        self._lock = threading.Lock()
        self._stamp: object = None
        self._definitions: list[dict[str, Any]] = []

    def _snapshot_stamp(self) -> object:
        from registry.mcp_cache import CACHE_FILE

        try:
            return (self.settings.home / CACHE_FILE).stat().st_mtime_ns
        except OSError:
            return "absent"

    def definitions(self) -> list[dict[str, Any]]:
        stamp = self._snapshot_stamp() if self.settings.mcp_servers else "none"
        with self._lock:
            if stamp != self._stamp:
                self._definitions = load_definitions(self.settings, self.toolsets)
                self._stamp = stamp
            return self._definitions

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The JSON schema of tool ``name``'s arguments (None: no such tool)."""
        for definition in self.definitions():
            function = definition.get("function", definition)
            if function.get("name") == name:
                schema: dict[str, Any] | None = function.get("parameters")
                return schema
        return None


def mcp_tools(definitions: list[dict[str, Any]]) -> list[types.Tool]:
    """The definitions as MCP tools (name, description, JSON schema of the arguments)."""
    tools = []
    for definition in definitions:
        function = definition.get("function", definition)
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        tools.append(types.Tool(name=function["name"], description=function.get("description"),
                                input_schema=schema))  # fmt: skip
    return tools


def call_result(raw: str) -> types.CallToolResult:
    """The MCP result of a call that answered ``raw`` (its tool-result JSON, unchanged)."""
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    failed = (
        isinstance(parsed, dict) and bool(parsed.get("error")) and parsed.get("exit_code") is None
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=raw)],
                                is_error=failed)  # fmt: skip


def failure_result(message: str) -> types.CallToolResult:
    """A call that got no answer from the workers (broker down, no token): a JSON error."""
    return call_result(tool_error(message, status="error"))
