"""MCP wire-level types shared by the catalog and its connections: a server's settings,
a tool's spec, the error of an unreachable server, and what a server process gets.

A server process gets only :func:`server_environment`: a secret-free baseline
(:data:`BASELINE_ENV_VARS`) plus its configured ``env``, never the worker's
environment (``SBX_SECRET_KEY``, broker credentials).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One configured MCP server (stdio transport).

    ``env`` holds the *only* variables the server process gets besides a fixed,
    secret-free baseline (:data:`BASELINE_ENV_VARS`): the worker's own environment
    (``SBX_SECRET_KEY``, broker credentials, cloud keys) is never inherited. Its
    values are secrets: ``env`` is left out of ``repr`` so a logged config shows none.
    """

    id: str
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = field(default=None, repr=False)
    enabled: bool = True
    force_prompt_tools: frozenset[str] = frozenset()
    timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class McpToolSpec:
    """A tool as listed by a server."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


class McpServerUnavailable(RuntimeError):
    """The server could not be started, did not answer in time, or its connection closed."""


BASELINE_ENV_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
"""What a server process inherits from the worker: locations and locale, never credentials."""


def server_environment(server: McpServerConfig) -> dict[str, str]:
    """The complete environment of ``server``'s process: the baseline, then its ``env``.

    Passed in full (never ``None``) so that the isolation does not depend on how
    an SDK version fills in a missing environment.
    """
    env = {k: v for k in BASELINE_ENV_VARS if (v := os.environ.get(k)) is not None}
    return env | (server.env or {})


def stdio_params(server: McpServerConfig) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=server.command, args=list(server.args), env=server_environment(server)
    )


def server_stderr() -> TextIO:
    """Where a server process's stderr goes: this process's stderr, as a real file.

    Celery replaces ``sys.stderr`` with a logging proxy that has no file descriptor,
    which a child cannot inherit (and the SDK's default is bound at import time), so
    fall back to the original ``sys.__stderr__``, then to ``/dev/null``.
    """
    global _devnull
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    if _devnull is None:
        _devnull = open(os.devnull, "w")  # noqa: SIM115 - kept open for every later server
    return _devnull


_devnull: TextIO | None = None


def tool_specs(tools: list[Any]) -> list[McpToolSpec]:
    return [
        McpToolSpec(t.name, t.description or "", dict(getattr(t, "input_schema", {}) or {}))
        for t in tools
    ]


def call_result(res: Any) -> dict[str, Any]:
    """A ``CallToolResult`` as the registry returns it: text joined, errors flagged.

    Only text reaches the model: an embedded text resource counts as text; any other
    content (an image, audio, a binary resource, a link) is named in a line saying it
    was left out, never dropped without a word.
    """
    texts = [_as_text(c) for c in res.content]
    out: dict[str, Any] = {"content": "\n".join(texts)}
    structured = getattr(res, "structured_content", None)
    if structured is not None:
        out["structured"] = structured
    if getattr(res, "is_error", False):
        out["error"] = out["content"] or "MCP tool reported an error"
    return out


def _as_text(content: Any) -> str:
    kind = getattr(content, "type", "")
    if kind == "text":
        return str(getattr(content, "text", ""))
    resource = getattr(content, "resource", None)
    embedded = getattr(resource, "text", None)
    if kind == "resource" and isinstance(embedded, str):
        return embedded
    what = getattr(content, "mime_type", None) or getattr(resource, "mime_type", None)
    uri = getattr(content, "uri", None) or getattr(resource, "uri", None)
    named = ", ".join(str(x) for x in (what, uri) if x)
    label = f"{kind or 'unknown'} content" + (f" ({named})" if named else "")
    return f"[sbx: {label} left out: only text reaches the model]"


def bounded_result(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """``result`` (as :func:`call_result` makes it) within ``limit`` bytes of text, as a
    terminal's output is: a longer ``content`` keeps its head and tail with the omission
    marker between, and ``structured`` content longer than ``limit`` is left out;
    ``truncated`` says either happened."""
    from environments.shell.output import OutputCapture

    bounded = dict(result)
    content = result.get("content")
    if isinstance(content, str) and len(content.encode("utf-8", "replace")) > limit:
        capture = OutputCapture(limit)
        capture.feed(content.encode("utf-8", "replace"))
        bounded["content"] = capture.text()
        bounded["truncated"] = True
    if "structured" in result:
        size = len(json.dumps(result["structured"], default=str).encode())
        if size > limit:
            del bounded["structured"]
            bounded["structured_omitted"] = f"{size} bytes, over the output limit of {limit}"
            bounded["truncated"] = True
    if isinstance(result.get("error"), str) and bounded.get("truncated"):
        bounded["error"] = bounded["content"] or result["error"][:limit]
    return bounded
