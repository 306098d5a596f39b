"""The ``read_file`` and ``write_file`` tools: text files in the caller's session sandbox.

Contracts (docs/tool-calls.md):

* Paths are the sandbox's: relative ones start at the session's working
  directory; files are reached through the backend's own file operations
  (:mod:`registry.tools.file_access`), so nothing outside the sandbox is reachable,
  nor the worker's own state on backends that run on its machine.
* Both are judged by the approval guard as the equivalent shell command would be
  (``cat -- PATH``, ``cat > PATH``): writing a login or system file needs approval.
* ``read_file`` returns UTF-8 text, a window of lines at most ``output_limit`` bytes,
  with every secret the redactor knows replaced (line numbers count the lines of
  the redacted text). Binary files and files over ``SBX_MAX_FILE_BYTES`` are refused.
* ``write_file`` creates or replaces a file (its directory must exist) with the text.
* Failures are ``{"error", "status"}`` with status ``not_found``, ``denied``,
  ``invalid`` or ``error``; refusals are those of ``terminal``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from environments.base import Environment

from ..context import ToolContext
from ..core import ToolRegistry, registry
from .file_access import (
    FilePolicy,
    confine,
    file_error,
    iter_chunks,
    policy_of,
    resolve_path,
    too_large,
)
from .terminal import approval_refusal

DEFAULT_LINES = 2000

READ_FILE_SCHEMA: dict[str, Any] = {
    "description": (
        "Read a text file in your sandbox. Returns `content` (up to `limit` lines from "
        "line `offset`, 1-based), `start_line`, `end_line`, `total_lines` and `truncated` "
        "(more lines follow: read on from `end_line + 1`). Relative paths start at your "
        "working directory. Secrets in the file appear as [REDACTED]. Binary files are "
        "refused: inspect them with the `terminal` tool."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "First line to return (1-based).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"Most lines to return (default {DEFAULT_LINES}).",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}

WRITE_FILE_SCHEMA: dict[str, Any] = {
    "description": (
        "Create or replace a text file in your sandbox with `content` (UTF-8). Its "
        "directory must exist. Relative paths start at your working directory. Content "
        "you read as [REDACTED] is written as that text, not as the secret."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to write."},
            "content": {"type": "string", "description": "The file's whole new text."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
}


class ReadFileArgs(BaseModel):
    """Validated arguments of ``read_file``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1)
    offset: int = Field(default=1, ge=1)
    limit: int | None = Field(default=None, ge=1)


class WriteFileArgs(BaseModel):
    """Validated arguments of ``write_file``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1)
    content: str


def _window(text: str, offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int]:
    """``(content, first line, last line, total lines)``: at most ``limit`` lines from
    ``offset`` and at most ``max_bytes`` bytes (a longer first line is cut)."""
    lines = text.splitlines(keepends=True)
    start = min(offset - 1, len(lines))
    kept: list[str] = []
    used = 0
    for line in lines[start : start + limit]:
        size = len(line.encode())
        if used + size > max_bytes:
            if not kept:  # one line longer than the whole budget: its head
                kept.append(line.encode()[:max_bytes].decode("utf-8", "ignore"))
            break
        kept.append(line)
        used += size
    return "".join(kept), start + 1, start + len(kept), len(lines)


def _in_sandbox(
    ctx: ToolContext, raw_path: str, judged_as: str,
    act: Callable[[Environment, str, FilePolicy], dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """``act(env, absolute path, policy)`` in the session's sandbox, once the path is
    confined and the approval guard let ``judged_as`` (``{}``: the quoted path) through."""
    policy = policy_of(ctx.components)
    path = raw_path
    try:
        with ctx.pool.use(ctx.session_id, ctx.backend) as env:
            env.attach()  # a sandbox stopped or removed since the last call comes back first
            path = resolve_path(env, raw_path)
            confine(env, path, policy)  # before approval: never ask about what is refused
            refusal = approval_refusal(judged_as.format(shlex.quote(path)), ctx, held=env)
            if refusal is not None:
                return refusal
            return act(env, path, policy)
    except Exception as exc:
        return file_error(exc, path)


def handle_read_file(args: ReadFileArgs, ctx: ToolContext) -> dict[str, Any]:
    """Read a window of a text file (see module doc)."""

    def read(env: Environment, path: str, policy: FilePolicy) -> dict[str, Any]:
        data = b"".join(iter_chunks(env, path, policy.max_bytes))
        if b"\x00" in data:
            return {"error": f"{path} is a binary file; inspect it with the terminal tool",
                    "status": "invalid"}  # fmt: skip
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return {"error": f"{path} is not UTF-8 text; inspect it with the terminal tool",
                    "status": "invalid"}  # fmt: skip
        if ctx.redact_output:
            from process_registry.redact import redact_text  # the redactor loads on first use

            text = redact_text(text)
        content, first, last, total = _window(
            text, args.offset, args.limit or DEFAULT_LINES, ctx.output_limit
        )
        return {"path": path, "content": content, "start_line": first, "end_line": last,
                "total_lines": total, "truncated": last < total, "size": len(data)}  # fmt: skip

    return _in_sandbox(ctx, args.path, "cat -- {}", read)


def handle_write_file(args: WriteFileArgs, ctx: ToolContext) -> dict[str, Any]:
    """Create or replace a text file (see module doc)."""
    data = args.content.encode("utf-8", "replace")  # a lone surrogate cannot be UTF-8
    limit = policy_of(ctx.components).max_bytes
    if len(data) > limit:
        return file_error(too_large(len(data), limit), args.path)

    def write(env: Environment, path: str, policy: FilePolicy) -> dict[str, Any]:
        env.write_file(path, data)
        return {"path": path, "bytes_written": len(data)}

    return _in_sandbox(ctx, args.path, "cat > {}", write)


def register(target: ToolRegistry = registry) -> None:
    """Register ``read_file`` and ``write_file`` into ``target`` (toolset ``files``)."""
    target.register(
        "read_file", "files", READ_FILE_SCHEMA, handle_read_file, args_model=ReadFileArgs,
        emoji="📄",
    )  # fmt: skip
    target.register(
        "write_file", "files", WRITE_FILE_SCHEMA, handle_write_file, args_model=WriteFileArgs,
        emoji="✏️",
    )  # fmt: skip


register()
