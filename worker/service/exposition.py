"""A session's tool definitions, and the meta-tools of its deferred tools, on any worker.

* ``sbx.tools`` (:func:`execute_tools_request`) answers the definitions a
  session's model is offered (``registry.deferral.expose_tools``: toolsets,
  ``applies(scope)``, deferred exposition for the model's context window) and
  records what it deferred for the session in the ledger, replacing the record
  of the session's previous request and emptying its inspected set.
* ``tool_search``/``tool_inspect``/``tool_invoke`` calls (:func:`run_meta_tool`)
  work on that record. The inspected set lives in the ledger too, so a tool
  inspected through one worker may be invoked through another; a session sees
  only its own record. A deferred tool runs through ``handle_function_call``
  (hooks, repair), as an inline call would.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from registry.context import ToolContext
from registry.core import ToolRegistry
from registry.deferral import expose_tools
from registry.meta_tools import META_TOOL_NAMES, Invoker, MetaToolSession
from registry.results import to_json, tool_error
from worker.protocol.messages import ToolCallMessage, ToolsRequest
from worker.service.auth import verified_message
from worker.service.runtime import WorkerRuntime

log = logging.getLogger(__name__)


# Session ids may hold ``:``, so the kind of record comes before the id: with the id
# first, session ``v:inspected``'s record was session ``v``'s inspected set.


def exposition_key(session_id: str) -> str:
    """What the session's last tools request deferred (JSON: ``deferred``, ``inline``).

    No session's key is another's :func:`inspected_key`, whatever the ids."""
    return f"sbx:tools:exposed:{session_id}"


def inspected_key(session_id: str) -> str:
    """The deferred tools the session's model inspected since that request (a set)."""
    return f"sbx:tools:inspected:{session_id}"


def is_meta_tool(name: str) -> bool:
    return name in META_TOOL_NAMES


def execute_tools_request(raw: Any, svc: WorkerRuntime, tools: ToolRegistry) -> str:
    """Answer a :class:`ToolsRequest` with ``ToolDefinitions`` JSON (see module doc)."""
    request = verified_message(ToolsRequest, raw, svc, "tools", "tools request")
    if isinstance(request, str):
        return request
    exposition = expose_tools(
        tools, toolsets=request.toolsets, scope=request.scope,
        context_window=request.context_window,
    )  # fmt: skip
    deferred = [e.name for e in exposition.deferred]
    inline = [_name(t) for t in exposition.tools if not is_meta_tool(_name(t))]
    record = json.dumps({"deferred": deferred, "inline": inline})
    pipe = svc.ledger.client.pipeline(transaction=True)
    pipe.set(exposition_key(request.session_id), record, ex=svc.settings.lease_retention)
    pipe.delete(inspected_key(request.session_id))
    pipe.execute()
    return to_json({"tools": exposition.tools, "deferred": deferred,
                    "system_prompt": exposition.system_prompt_section()})  # fmt: skip


def _name(definition: dict[str, Any]) -> str:
    return str(definition["function"]["name"])


def run_meta_tool(
    message: ToolCallMessage, ctx: ToolContext, svc: WorkerRuntime, tools: ToolRegistry,
    invoke: Invoker,
) -> str:  # fmt: skip
    """Run meta-tool ``message.tool`` on the session's recorded exposition; ``invoke(name,
    params, ctx)`` runs a deferred tool."""
    client = svc.ledger.client
    raw: Any = client.get(exposition_key(ctx.session_id))
    if raw is None:
        return tool_error(
            f"{message.tool}: no tools are deferred for this session; request tool "
            "definitions with the model's context window first",
            status="not_found",
        )
    record = json.loads(raw)
    deferred = [e for e in (tools.get(n) for n in record.get("deferred", [])) if e is not None]
    session = MetaToolSession(tools, deferred, invoke=invoke, inline=record.get("inline", []))
    before = {m.decode() if isinstance(m, bytes) else str(m)
              for m in client.smembers(inspected_key(ctx.session_id))}  # type: ignore[union-attr]  # fmt: skip
    session.inspected = set(before)
    result = session.dispatch(message.tool, message.args, ctx)
    added = session.inspected - before
    if added:
        pipe = client.pipeline(transaction=False)
        pipe.sadd(inspected_key(ctx.session_id), *sorted(added))
        pipe.expire(inspected_key(ctx.session_id), svc.settings.lease_retention)
        pipe.execute()
    return result
