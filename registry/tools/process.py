"""The ``process`` tool: observe and control the caller's background processes.

Arguments (docs/tool-calls.md): ``{"action": "list"|"poll"|"log"|"wait"|"kill"|"write",
"process_id", "timeout", "offset", "limit", "data"}``. The handler delegates to
the worker's process service (``ctx.components["processes"]``, see
``worker.processes.ProcessManager.handle``), which checks the verified session
against each process's owner. Results are JSON objects; failures are
``{"error": ..., "status": "denied" | "not_found" | "invalid" | "error"}``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..context import ToolContext
from ..core import ToolRegistry, registry

DEFAULT_LOG_LIMIT = 16_384
MAX_LOG_LIMIT = 1 << 20

PROCESS_SCHEMA: dict[str, Any] = {
    "description": (
        "Manage background processes you started with `terminal` and `background: true`. "
        "Actions: `list` (your processes), `poll` (status and the last output lines), "
        "`log` (output from byte `offset`, at most `limit` bytes; continue from "
        "`next_offset` until `eof`), `wait` (block until it ends or `timeout` seconds "
        "pass), `kill` (terminate it and its children), `write` (type `data` into a "
        "process started with `pty: true`; include \\n to press Enter). "
        "Status is one of running, exited, killed, timeout, lost. Only processes of "
        "your own session are visible."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["list", "poll", "log", "wait", "kill", "write"],
                "description": "What to do.",
            },
            "process_id": {
                "type": "string",
                "description": "The process_id returned by terminal (all actions but list).",
            },
            "timeout": {
                "type": "integer",
                "minimum": 0,
                "description": "wait: seconds to wait at most (default: as long as the call may).",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "log: byte offset to read from (use next_offset of the last read).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LOG_LIMIT,
                "default": DEFAULT_LOG_LIMIT,
                "description": "log: at most this many bytes.",
            },
            "data": {
                "type": "string",
                "description": "write: text to send to the process's terminal.",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    },
}


class ProcessArgs(BaseModel):
    """Validated arguments of ``process``: strict types, no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)

    action: Literal["list", "poll", "log", "wait", "kill", "write"]
    process_id: str | None = Field(default=None, min_length=1, max_length=64)
    timeout: int | None = Field(default=None, ge=0)
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=DEFAULT_LOG_LIMIT, ge=1, le=MAX_LOG_LIMIT)
    data: str | None = None

    @model_validator(mode="after")
    def _needs(self) -> ProcessArgs:
        if self.action != "list" and self.process_id is None:
            raise ValueError(f"action {self.action!r} needs a process_id")
        if self.action == "write" and self.data is None:
            raise ValueError("action 'write' needs data (the text to send)")
        return self


def handle_process(args: ProcessArgs, ctx: ToolContext) -> dict[str, Any]:
    """Delegate to the worker's process service (owner checks happen there)."""
    service = ctx.components.get("processes")
    if service is None:
        return {"error": "background processes are not enabled on this worker", "status": "error"}
    return dict(service.handle(args, ctx))


def register(target: ToolRegistry = registry) -> None:
    """Register ``process`` into ``target`` (toolset ``process``)."""
    target.register(
        "process",
        "process",
        PROCESS_SCHEMA,
        handle_process,
        args_model=ProcessArgs,
        emoji="⚙️",
    )


register()
