"""Running one tool call: verify the caller, dispatch through the registry.

Plain functions: tests call them without a broker; the Celery task is a thin
wrapper that adds claiming and heartbeats.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from pydantic import ValidationError

from environments.registry import canonical_name
from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.core import registry as default_registry
from registry.discovery import discover_builtin_tools
from registry.dispatch import handle_function_call
from registry.results import tool_error
from worker.protocol.messages import ToolCallMessage
from worker.service.backends import BackendNotAllowed, check_backend_allowed
from worker.service.boundary import CallerDenied, error_result, verify_caller
from worker.service.runtime import WorkerRuntime

log = logging.getLogger(__name__)

# Built-in tools register themselves when their modules are imported.
discover_builtin_tools()

# Time kept back from the caller's deadline so the answer reaches it in time.
_ANSWER_MARGIN_S = 1.0


def cancelled_before_start(call_id: str) -> str:
    """The result of a call cancelled while it waited in the queue: nothing ran."""
    return tool_error(
        "cancelled by the caller before it started; nothing ran",
        status="cancelled",
        call_id=call_id,
    )


def execute_call(
    raw: Any,
    runtime: WorkerRuntime,
    tools: ToolRegistry = default_registry,
    *,
    cancel: threading.Event | None = None,
) -> str:
    """Run one call message; always returns the tool-result JSON string.

    ``cancel`` is set by the worker when the caller cancels the call.
    """
    try:
        message = ToolCallMessage.model_validate(raw)
    except ValidationError as exc:
        return tool_error(f"malformed call message: {exc.error_count()} problem(s): "
                          + "; ".join(e["msg"] for e in exc.errors(include_url=False)))  # fmt: skip
    try:
        verify_caller(runtime.signer, message.session_id, message.session_token)
    except CallerDenied as exc:
        return error_result(exc)
    settings = runtime.settings
    backend = canonical_name(message.backend or settings.backend)
    try:
        check_backend_allowed(settings, backend)
    except BackendNotAllowed as exc:
        return error_result(exc)
    budget = message.deadline_s or float(settings.max_timeout) + 60.0
    ctx = ToolContext(
        session_id=message.session_id,
        call_id=message.call_id,
        backend=backend,
        pool=runtime.pool,
        deadline=time.monotonic() + max(0.5, budget - _ANSWER_MARGIN_S),
        output_limit=settings.output_limit,
        redact_output=settings.redact_output,
        default_timeout=settings.default_timeout,
        max_timeout=settings.max_timeout,
        components=runtime.components,
        cancel=cancel or threading.Event(),
        forwarded=message.forwarded,
    )
    try:
        return handle_function_call(
            message.tool, message.args, task_id=message.call_id, ctx=ctx, registry=tools
        )
    except Exception as exc:  # dispatch wraps handlers; this guards dispatch itself
        log.exception("dispatch of %s failed", message.tool)
        return tool_error(f"Error executing {message.tool}: {type(exc).__name__}: {exc}")
