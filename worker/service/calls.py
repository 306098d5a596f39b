"""Running one tool call: verify the caller, check the operator's limits, dispatch.

Plain functions: tests call them without a broker; the Celery task is a thin
wrapper that adds the session's lease, claiming and heartbeats.
"""

from __future__ import annotations

import json
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
from registry.results import to_json, tool_error
from worker.protocol.messages import ToolCallMessage
from worker.protocol.tasks import SESSION_TOOLS
from worker.service.auth import authenticate
from worker.service.backends import BackendNotAllowed, check_backend_allowed
from worker.service.boundary import CallerDenied, error_result
from worker.service.exposition import is_meta_tool, run_meta_tool
from worker.service.live import LiveOutput
from worker.service.runtime import WorkerRuntime
from worker.service.transfers import run_transfer

log = logging.getLogger(__name__)

# Built-in tools register themselves when their modules are imported.
discover_builtin_tools()

# Time kept back from the caller's deadline so the answer reaches it in time.
_ANSWER_MARGIN_S = 1.0


def cancelled_before_start(call_id: str, by: str = "the caller") -> str:
    """The result of a call cancelled (``by`` whom: the caller, the worker shutting down)
    while it waited in the queue: nothing ran."""
    return tool_error(
        f"cancelled by {by} before it started; nothing ran",
        status="cancelled",
        call_id=call_id,
    )


def expired_before_start(call_id: str) -> str:
    """The result of a call whose caller's wait ended while it queued behind its session's
    earlier calls: nothing ran (the caller gave up on it; running it now would surprise)."""
    return tool_error(
        "not run: its caller's wait ended while it queued behind the session's earlier "
        "calls; nothing ran",
        status="cancelled",
        call_id=call_id,
    )


def call_deadline(message: ToolCallMessage, runtime: WorkerRuntime, taken_at: float) -> float:
    """The ``time.monotonic()`` instant by which the call must be answered: its caller's
    wait (``deadline_s``; else the longest timeout plus a minute), counted from
    ``taken_at``, when this worker took the call in -- time spent queued behind the
    session's earlier calls counts -- less a margin for the answer to travel."""
    budget = message.deadline_s or float(runtime.settings.max_timeout) + 60.0
    return taken_at + max(0.5, budget - _ANSWER_MARGIN_S)


def _limits_error(message: ToolCallMessage, runtime: WorkerRuntime) -> str | None:
    """An ``invalid`` result for a call over the operator's limits, before anything parses
    its arguments (None: within them)."""
    settings = runtime.settings
    args = message.args
    if isinstance(args, str):
        if len(args.encode("utf-8", "surrogatepass")) > settings.max_call_bytes:
            return tool_error(
                f"the call's arguments exceed {settings.max_call_bytes} bytes "
                "(SBX_MAX_CALL_BYTES); nothing ran",
                status="invalid",
            )
        return None
    if not isinstance(args, dict):
        return None
    content = args.get("content")
    if isinstance(content, str) and len(content.encode("utf-8", "surrogatepass")) > (
        settings.max_call_bytes
    ):
        return tool_error(
            f"the content exceeds {settings.max_call_bytes} bytes (SBX_MAX_CALL_BYTES); "
            "nothing was written: move large files with upload",
            status="invalid",
        )
    command = args.get("command")
    if isinstance(command, str) and len(command.encode("utf-8", "surrogatepass")) > (
        settings.max_command_bytes
    ):
        return tool_error(
            f"the command is {len(command.encode('utf-8', 'surrogatepass'))} bytes, over the "
            f"operator's maximum of {settings.max_command_bytes} (SBX_MAX_COMMAND_BYTES); "
            "nothing ran",
            status="invalid",
        )
    timeout = args.get("timeout")
    numeric = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if numeric and float(timeout or 0) > settings.max_timeout:
        return tool_error(
            f"timeout {timeout:g} s exceeds the operator's maximum of "
            f"{settings.max_timeout} s (SBX_MAX_TIMEOUT); nothing ran",
            status="invalid",
        )
    return None


def prepare_call(raw: Any, runtime: WorkerRuntime) -> ToolCallMessage | str:
    """The verified call message of ``raw``, or the error result that answers it."""
    message = parse_call(raw)
    return message if isinstance(message, str) else verify_call(message, runtime)


def parse_call(raw: Any) -> ToolCallMessage | str:
    """``raw`` as a call message (not verified yet), or the ``invalid`` result answering it."""
    try:
        return ToolCallMessage.model_validate(raw)
    except ValidationError as exc:
        return tool_error(f"malformed call message: {exc.error_count()} problem(s): "
                          + "; ".join(e["msg"] for e in exc.errors(include_url=False)),
                          status="invalid")  # fmt: skip


def verify_call(
    message: ToolCallMessage, runtime: WorkerRuntime, epoch: int | None = None
) -> ToolCallMessage | str:
    """``message`` once its caller is verified (``epoch``: its session's revocation epoch,
    when read from the ledger just now) and it is within the operator's limits; else the
    error result that answers it."""
    try:
        authenticate(runtime, "call", message, message.session_id, message.proof,
                     message.call_id, epoch)  # fmt: skip
        check_backend_allowed(
            runtime.settings, canonical_name(message.backend or runtime.settings.backend)
        )
    except (CallerDenied, BackendNotAllowed) as exc:
        # Refusals are the operator's business (a misconfigured platform, or an attack);
        # the reason names no command, output or token.
        log.warning("call refused (%s): %s", exc.status, exc)
        return error_result(exc)
    too_big = _limits_error(message, runtime)
    if too_big is not None:
        return too_big
    return message


def uses_session(message: ToolCallMessage) -> bool:
    """True for calls that run in the session's sandbox (its lease applies)."""
    return message.tool in SESSION_TOOLS


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
    prepared = prepare_call(raw, runtime)
    if isinstance(prepared, str):
        return prepared
    return run_call(prepared, runtime, tools, cancel=cancel)


def run_call(
    message: ToolCallMessage,
    runtime: WorkerRuntime,
    tools: ToolRegistry = default_registry,
    *,
    cancel: threading.Event | None = None,
    moved_from: str | None = None,
    deadline: float | None = None,
) -> str:
    """Dispatch a prepared call. ``moved_from``: the session was taken over from that
    worker; it is rebuilt here first and the result says ``session_moved``.
    ``deadline``: from :func:`call_deadline` (None: counted from now)."""
    settings = runtime.settings
    backend = canonical_name(message.backend or settings.backend)
    notes: list[str] = []
    if moved_from is not None and runtime.leases is not None:
        try:
            with runtime.pool.use(message.session_id, backend) as env:
                notes = runtime.leases.rehome(message.session_id, backend, env)
        except Exception as exc:  # the call itself reports what is wrong with the sandbox
            notes = [f"could not rebuild the session here: {type(exc).__name__}: {exc}"]
    if deadline is None:
        deadline = call_deadline(message, runtime, time.monotonic())
    ctx = ToolContext(
        session_id=message.session_id,
        call_id=message.call_id,
        backend=backend,
        pool=runtime.pool,
        deadline=deadline,
        output_limit=settings.output_limit,
        redact_output=settings.redact_output,
        default_timeout=settings.default_timeout,
        max_timeout=settings.max_timeout,
        components=runtime.components,
        cancel=cancel or threading.Event(),
        forwarded=message.forwarded,
    )
    live = None
    if message.stream and message.transfer is None:
        live = LiveOutput(runtime.streams, message.call_id, redact=settings.redact_output)
        ctx.on_output = live.feed
    try:
        result = _dispatch(message, ctx, runtime, tools)
    except Exception as exc:  # dispatch wraps handlers; this guards dispatch itself
        log.exception("dispatch of %s failed", message.tool)
        return tool_error(f"Error executing {message.tool}: {type(exc).__name__}: {exc}")
    finally:
        if live is not None:
            live.close()  # every piece is on the stream before the result is delivered
    if runtime.leases is not None and uses_session(message):
        _record_state(runtime, message.session_id, backend)
    if moved_from is not None:
        result = _say_moved(result, notes)
    return result


_TRANSFER_TOOLS = {"upload": "write_file", "download": "read_file"}


def _dispatch(
    message: ToolCallMessage, ctx: ToolContext, runtime: WorkerRuntime, tools: ToolRegistry
) -> str:
    """The call's result: a platform transfer, a meta-tool of the session's deferred
    tools, or a tool of the registry (hooks and the operator's repair around it)."""
    repair = runtime.components.get("repair")
    if message.transfer is not None:
        if _TRANSFER_TOOLS[message.transfer] != message.tool:
            return tool_error(f"a {message.transfer} is a {_TRANSFER_TOOLS[message.transfer]} "
                              "call", status="invalid")  # fmt: skip
        return run_transfer(message, ctx, runtime.streams)
    if is_meta_tool(message.tool):

        def invoke(name: str, params: dict[str, Any], context: ToolContext) -> str:
            return handle_function_call(name, params, task_id=context.call_id, ctx=context,
                                        registry=tools, repair=repair)  # fmt: skip

        return run_meta_tool(message, ctx, runtime, tools, invoke)
    return handle_function_call(
        message.tool, message.args, task_id=message.call_id, ctx=ctx, registry=tools,
        repair=repair,
    )  # fmt: skip


def _record_state(runtime: WorkerRuntime, session_id: str, backend: str) -> None:
    env = runtime.pool.get_existing(session_id, backend)
    if env is None or runtime.leases is None:
        return
    try:
        runtime.leases.record(session_id, backend, env)
    except Exception:  # the call succeeded; a later call records again
        log.warning("could not record the state of a session", exc_info=True)


def _say_moved(result: str, notes: list[str]) -> str:
    """``result`` with ``session_moved: true`` and what could not be restored in ``error``."""
    try:
        payload = json.loads(result)
    except ValueError:
        return result
    if not isinstance(payload, dict):
        return result
    payload["session_moved"] = True
    if notes:
        said = "; ".join(notes)
        payload["error"] = f"{payload['error']}; {said}" if payload.get("error") else said
    return to_json(payload)
