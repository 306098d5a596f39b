"""Celery tasks: thin wrappers that claim a call, keep it alive and run it."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery, Task
from celery.exceptions import Ignore

from process_registry.tokens.formats import is_session_id
from registry.context import Cancellation
from registry.core import registry
from registry.results import tool_error
from worker.protocol.leases import LeaseRenewal
from worker.protocol.ledger import CANCELLED, DUPLICATE, CallLedger, delivered_key
from worker.protocol.messages import ToolCallMessage
from worker.protocol.tasks import APPROVAL_TASK, PING_TASK, TOOL_CALL_TASK, TOOLS_TASK
from worker.service.answer_errors import redact_error
from worker.service.approvals import execute_approval
from worker.service.auth import CallerScope, caller_scope
from worker.service.call_observers import notify_answered
from worker.service.calls import (
    call_deadline,
    cancelled_before_start,
    expired_before_start,
    parse_call,
    run_call,
    uses_session,
    verify_call,
)
from worker.service.dispatcher import Busy
from worker.service.exposition import execute_tools_request
from worker.service.runtime import WorkerRuntime, runtime

log = logging.getLogger(__name__)

# How long a finished call's worker keeps trying to hand its result to a broker
# that went away, so a broker restart does not lose the answer of a call that ran.
DELIVERY_PATIENCE_S = 300.0


def deliver_result(
    ledger: CallLedger,
    call_id: str,
    result: str,
    seal: Callable[[str], str] | None = None,
    patience: float = DELIVERY_PATIENCE_S,
    renew: LeaseRenewal | None = None,
) -> bool:
    """Deliver ``result`` (its error text redacted, then sealed with ``seal`` for its
    caller) to the call's mailbox, retrying while the broker is unreachable; the
    worker's observers see it unsealed. ``renew``: the session lease the delivery renews.

    True when delivered (or a result was delivered before); False when the
    broker stayed unreachable for ``patience`` seconds (logged: the result is gone).
    """
    result = redact_error(result)
    notify_answered(call_id, result)
    if seal is not None:
        result = seal(result)
    deadline = time.monotonic() + patience
    backoff, warned = 0.05, False
    while True:
        try:
            ledger.deliver(call_id, result, renew)
            if warned:
                log.warning("broker back: result of call %s delivered", call_id)
            return True
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() >= deadline:
                log.error("result of call %s not delivered: broker unreachable for %gs (%s)",
                          call_id, patience, exc)  # fmt: skip
                return False
            if not warned:
                log.warning("broker unreachable; holding the result of call %s: %s", call_id, exc)
                warned = True
            # Retry backoff: there is nothing to wait on while the broker is down.
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, 2.0)


MAX_HANDOFFS = 3
"""A call handed on this often found its session's lease moving under it: answered
``busy`` instead of chasing the lease further."""


def run_claimed(call_id: str, message: Any, svc: WorkerRuntime) -> str | None:
    """Run ``message`` unless ``call_id`` was claimed before (then raise ``Ignore``).

    A call of a session that another present worker serves is handed to that
    worker's own queue with its claim (its answer comes from there; None here).
    The result goes to the call's mailbox (:meth:`CallLedger.deliver`), sealed for
    the verified caller (``worker.service.auth``), where the client waits for it;
    it is also returned (to in-process callers and tests).
    """
    with caller_scope(call_id) as caller:
        return _run_claimed(call_id, message, svc, caller)


def _run_claimed(call_id: str, message: Any, svc: WorkerRuntime, caller: CallerScope) -> str | None:
    taken_at = time.monotonic()  # the caller's wait counts from here (call_deadline)
    ledger = svc.ledger
    parsed = parse_call(message)
    session_id = "" if isinstance(parsed, str) else parsed.session_id
    if is_session_id(session_id):
        # The claim's round trip also reads the epoch the caller's proof is checked against.
        claim, epoch = ledger.claim_reading_epoch(call_id, svc.worker_id, session_id)
    else:
        claim, epoch = ledger.claim(call_id, svc.worker_id, session_id), None
    if claim == DUPLICATE:
        # A redelivery: the first delivery runs (or ran) it and delivers the result.
        raise Ignore()
    prepared = parsed if isinstance(parsed, str) else verify_call(parsed, svc, epoch)
    if claim == CANCELLED:
        result = cancelled_before_start(call_id)
        deliver_result(ledger, call_id, result, caller.seal)
        return result
    moved_from: str | None = None
    if not isinstance(prepared, str) and svc.leases is not None and uses_session(prepared):
        admitted = svc.leases.admit(prepared.session_id)
        if not admitted.mine and prepared.handoffs < MAX_HANDOFFS:
            _hand_over(svc, prepared, str(admitted.holder_queue), str(admitted.holder))
            return None
        if not admitted.mine:
            prepared = tool_error(
                "the session's lease kept moving between workers; retry the call",
                status="busy",
            )
        else:
            moved_from = admitted.taken_over_from
    if isinstance(prepared, str):
        deliver_result(ledger, call_id, prepared, caller.seal)
        svc.heartbeat.finish(call_id)
        return prepared
    cancel = Cancellation()
    svc.heartbeat.add(call_id, cancel)
    # Sealed with the verified caller's token, also on the dispatcher's thread.
    job: Callable[[], str] = functools.partial(
        _run_taken, svc, call_id, prepared, cancel, moved_from, caller.seal, taken_at
    )
    if svc.dispatcher is None:
        return job()
    try:
        svc.dispatcher.submit(prepared.session_id, job)
    except Busy as exc:
        result = tool_error(str(exc), status="busy")
        deliver_result(ledger, call_id, result, caller.seal)
        svc.heartbeat.finish(call_id)
        return result
    return None


def _run_taken(
    svc: WorkerRuntime,
    call_id: str,
    message: ToolCallMessage,
    cancel: Cancellation,
    moved_from: str | None,
    seal: Callable[[str], str],
    taken_at: float,
) -> str:
    """Run a claimed call taken in at ``taken_at`` and deliver its result, sealed with
    ``seal`` (on a runner thread of the dispatcher).

    A call that waited behind its session's earlier calls until it was cancelled, or
    until its caller's wait was over, is answered without running; so is one whose
    session another worker took over meanwhile (this worker's presence lapsed), or that
    was declared lost meanwhile: two workers never run one session's calls."""
    try:
        deadline = call_deadline(message, svc, taken_at)
        if cancel.is_set():  # by the caller, or by the worker shutting down
            result = cancelled_before_start(call_id, cancel.reason)
        elif time.monotonic() >= deadline:
            result = expired_before_start(call_id)
        elif (stale := _no_longer_ours(svc, call_id, message, taken_at)) is not None:
            log.warning("call %s not run: %s", call_id, stale)
            result = tool_error(f"not run: {stale}; nothing ran: retry the call",
                                status="cancelled", call_id=call_id)  # fmt: skip
        else:
            result = run_call(message, svc, cancel=cancel, moved_from=moved_from, deadline=deadline)
        deliver_result(svc.ledger, call_id, result, seal, renew=_renewal(svc, message))
        return result
    finally:
        svc.heartbeat.finish(call_id)


def _renewal(svc: WorkerRuntime, message: ToolCallMessage) -> LeaseRenewal | None:
    """The session lease a call's delivery renews (None: the call uses no session)."""
    if svc.leases is None or not uses_session(message):
        return None
    return svc.leases.renewal(message.session_id)


def _no_longer_ours(
    svc: WorkerRuntime, call_id: str, message: ToolCallMessage, taken_at: float
) -> str | None:
    """Why a session call taken in here at ``taken_at`` must not run now (None: it may):
    a worker paused past its presence (a stopped process, a frozen VM) resumes here."""
    if svc.leases is None or not uses_session(message):
        return None
    return svc.leases.confirm(message.session_id, delivered_key(call_id), taken_at)


def _hand_over(svc: WorkerRuntime, message: ToolCallMessage, queue: str, holder: str) -> None:
    """Give a claimed call to the worker serving its session (same call id, its claim
    passed on: that worker claims it when it takes the message)."""
    onward = message.model_copy(update={"handoffs": message.handoffs + 1})
    if svc.ledger.hand_off(message.call_id, svc.worker_id, holder):
        svc.sender().send_call(onward, queue)
        notify_answered(message.call_id, None)
        log.debug("call %s handed to %s, which serves its session", message.call_id, queue)


def answer_in_mailbox(
    task_id: str, execute: Callable[[Any, WorkerRuntime], str], message: Any
) -> str:
    """``execute(message, runtime())``, its answer delivered to ``task_id``'s mailbox."""
    svc = runtime()
    with caller_scope(task_id) as caller:
        answer = execute(message, svc)
        deliver_result(svc.ledger, task_id, answer, caller.seal)
    return answer


def register_tasks(app: Celery) -> None:
    """Add sbx's tasks to ``app``; each answers through the ledger's mailbox."""

    @app.task(name=TOOL_CALL_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def tool_call(self: Task, message: dict[str, Any]) -> str | None:
        return run_claimed(str(self.request.id), message, runtime())

    @app.task(name=APPROVAL_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def approval(self: Task, message: dict[str, Any]) -> str:
        return answer_in_mailbox(str(self.request.id), execute_approval, message)

    @app.task(name=TOOLS_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def tools(self: Task, message: dict[str, Any]) -> str:
        return answer_in_mailbox(
            str(self.request.id), lambda m, svc: execute_tools_request(m, svc, registry), message
        )

    @app.task(name=PING_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def ping(self: Task) -> str:
        # A ping's asker waits seconds, not minutes: do not hold its answer long.
        deliver_result(runtime().ledger, str(self.request.id), "pong", patience=5.0)
        return "pong"
