"""Sending tasks to workers and waiting for their answers in the ledger.

:class:`CallSender` is the one way a message reaches a worker and its answer
comes back, used by platform clients and by workers that forward an action to
another worker alike. Every sbx task answers through its mailbox in the ledger
under the task id, never through Celery's result backend.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Generator
from typing import Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from registry.results import tool_error
from worker.broker.app import create_app
from worker.broker.connection import display_url, redis_client
from worker.errors import BrokerUnavailable, ForgedResult
from worker.protocol.leases import LeaseBook
from worker.protocol.ledger import CallLedger, claim_lifetime, declare_lost
from worker.protocol.messages import ToolCallMessage
from worker.protocol.streams import Piece, drain
from worker.protocol.tasks import SENT_AT_HEADER, TOOL_CALL_TASK
from worker.settings import Settings

# How often a waiting sender checks that the call's worker is alive.
_LIVENESS_POLL_S = 1.0
# Reconnection backoff while the broker is unreachable.
_RECONNECT_FIRST_S = 0.05
_RECONNECT_MAX_S = 1.0
REROUTE_CHECK_S = 2.0
"""How often a sender checks that an unclaimed call still goes to the right worker."""

Accept = Callable[[str], "str | None"]
"""Opens a mailbox value (``worker.protocol.mac``): the answer, or None for a forged one."""


def _forged(call_id: str, count: int) -> ForgedResult:
    return ForgedResult(
        f"call {call_id}: {count} answer(s) failed their authentication check (written by "
        "something other than a worker) and were dropped; no genuine answer came in time"
    )


class CallSender:
    """Publishes sbx tasks to ``broker_url`` and collects their answers from ``ledger_url``."""

    def __init__(self, broker_url: str, ledger_url: str, settings: Settings) -> None:
        self.settings = settings
        self.broker_url = broker_url
        self.ledger_url = ledger_url
        self.app: Celery = create_app(broker_url, settings)
        client = redis_client(ledger_url)
        self.ledger = CallLedger(
            client,
            claim_ttl=claim_lifetime(settings.claim_ttl),
            lost_after=settings.lost_after,
            result_ttl=settings.result_ttl,
        )
        self.leases = LeaseBook(client, presence_ttl=settings.lost_after)

    def send(self, task: str, args: list[Any], task_id: str, queue: str | None) -> None:
        """Publish one task message; :class:`BrokerUnavailable` if the broker is down."""
        try:
            self.app.send_task(
                task,
                args=args,
                task_id=task_id,
                queue=queue or self.settings.queue,
                ignore_result=True,
                # Celery would otherwise copy a repr of the arguments (commands, tokens)
                # into the message headers: work per call, and a second copy of secrets.
                argsrepr="",
                kwargsrepr="",
                headers={SENT_AT_HEADER: time.time()},
            )
        except (OperationalError, redis.RedisError) as exc:
            raise BrokerUnavailable(
                f"cannot reach the broker at {display_url(self.broker_url)}: {exc}; "
                "the call was not sent"
            ) from None

    def send_call(self, message: ToolCallMessage, queue: str | None = None) -> None:
        """Queue a tool call (``queue``: the shared queue when None); :meth:`wait_answer`
        or :meth:`result` then collects it by ``message.call_id``."""
        self.send(TOOL_CALL_TASK, [message.model_dump(mode="json")], message.call_id, queue)

    def cancel(self, call_id: str) -> None:
        """Stop call ``call_id``: a queued call never runs; a running one has its tree killed."""
        self.ledger.request_cancel(call_id)

    def wait_answer(
        self, call_id: str, wait: float, *, claimed: bool, accept: Accept | None = None
    ) -> str | None:
        """The answer of ``call_id`` within ``wait`` seconds, else None.

        ``claimed`` calls (tool calls) whose worker died answer ``lost``; a call whose
        result was taken before answers it again while it is kept (``result_ttl``), then
        ``{"status": "collected"}``. A broker
        that goes away is waited for until the deadline (a worker holds a
        finished call's result until it can deliver it), then :class:`BrokerUnavailable`.
        ``accept`` opens each answer; one it refuses is dropped and the wait goes on (the
        genuine answer may still come); if none came, :class:`~worker.errors.ForgedResult`.
        """
        answer = self._wait(call_id, wait, claimed=claimed, streamed=False, accept=accept)
        assert not isinstance(answer, Piece)  # only a streamed wait returns pieces
        return answer

    def _wait(
        self,
        call_id: str,
        wait: float,
        *,
        claimed: bool,
        streamed: bool,
        accept: Accept | None,
        reconnect_until: float | None = None,
    ) -> str | Piece | None:
        """:meth:`wait_answer`; ``streamed``: a piece of the call's stream, as soon as one
        comes, is an answer too (pieces are not sealed: what they carry is checked against
        the sealed result -- a download's size and digest -- or is output the result
        repeats). ``reconnect_until``: the ``time.monotonic()`` instant until which a lost
        connection is retried (default: the end of ``wait``); a caller that waits in
        slices (:meth:`exchange`) passes its own deadline, so that an outage longer than
        one slice does not end the caller's whole wait."""
        take = self.ledger.take_streamed if streamed else self.ledger.take_result
        deadline = time.monotonic() + wait
        give_up = deadline if reconnect_until is None else max(deadline, reconnect_until)
        backoff = _RECONNECT_FIRST_S
        forged = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                value = take(call_id, min(_LIVENESS_POLL_S, max(0.0, remaining)))
                if isinstance(value, Piece):
                    return value
                if value is not None:
                    opened = value if accept is None else accept(value)
                    if opened is not None:
                        return opened
                    forged += 1
                    continue
                if claimed and self.ledger.is_lost(call_id):
                    declare_lost(self.ledger, call_id, None)
                    continue
                if claimed and self.ledger.collected(call_id):
                    kept = self.ledger.answer(call_id)
                    opened = kept if kept is None or accept is None else accept(kept)
                    if opened is not None:
                        return opened  # a retry of a call whose result was collected
                    if forged or kept is not None:  # marked delivered, no genuine answer
                        raise _forged(call_id, forged + 1)
                    return tool_error(
                        f"the result of call {call_id} was collected and is no longer "
                        "kept (SBX_RESULT_TTL)",
                        status="collected",
                        call_id=call_id,
                    )
                backoff = _RECONNECT_FIRST_S
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() >= give_up:
                    raise BrokerUnavailable(
                        f"lost the connection to {display_url(self.ledger_url)} while waiting for "
                        f"call {call_id}: {exc}; the call may have run: collect its result "
                        "with result(call_id, wait) once the broker is back"
                    ) from None
                # Retry backoff, not synchronisation: nothing to wait on while it is down.
                time.sleep(min(backoff, max(0.0, give_up - time.monotonic())))
                backoff = min(backoff * 2, _RECONNECT_MAX_S)
                continue
            if time.monotonic() >= deadline:
                if forged:
                    raise _forged(call_id, forged)
                return None

    def call(
        self,
        message: ToolCallMessage,
        queue: str | None,
        wait: float,
        reroute: Callable[[], str | None] | None = None,
        *,
        accept: Accept | None = None,
        sign: Callable[[ToolCallMessage], ToolCallMessage] | None = None,
    ) -> str:
        """Send a tool call and wait up to ``wait`` seconds for its result (see :meth:`result`).

        While nobody has claimed it, ``reroute()`` names where it should go now (a worker's
        own queue, or None for the shared one); when that differs from where it was sent --
        the worker it was sent to is gone, or its session moved -- it is sent there again,
        with what is left of its deadline (proved again with ``sign``). The claim key makes
        a call run at most once however often it was sent. ``accept``: see :meth:`wait_answer`.
        Pieces of a streamed call's stream are passed over.
        """
        return drain(self.exchange(message, queue, wait, reroute, accept=accept, sign=sign))

    def exchange(
        self,
        message: ToolCallMessage,
        queue: str | None,
        wait: float,
        reroute: Callable[[], str | None] | None = None,
        *,
        accept: Accept | None = None,
        sign: Callable[[ToolCallMessage], ToolCallMessage] | None = None,
    ) -> Generator[bytes, None, str]:
        """:meth:`call` that yields the pieces of the call's stream as they come (when
        ``message.stream``) and returns its result."""
        self.send_call(message, queue)
        deadline = time.monotonic() + wait
        sent_to = queue
        taken = False  # seen claimed: never sent again, even if the ledger forgets the claim
        while True:
            remaining = deadline - time.monotonic()
            answer = self._wait(
                message.call_id,
                max(0.0, min(REROUTE_CHECK_S, remaining)),
                claimed=True,
                streamed=message.stream,
                accept=accept,
                reconnect_until=deadline,  # an outage is ridden out until the caller's deadline
            )
            if isinstance(answer, Piece):
                yield answer.data
                continue
            if answer is not None:
                return answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._pending(message.call_id, wait)
            if reroute is None or taken:
                continue
            claimed = self._claimed(message.call_id)
            if claimed:
                # A worker took the call: it runs or ran. A ledger that loses its data (a
                # Redis restarted empty) would make it look unclaimed again; sending it
                # again then would run the command twice.
                taken = True
            elif claimed is False:
                try:
                    target = reroute()
                except BrokerUnavailable:
                    continue  # the ledger is away: wait_answer rides that out
                if target != sent_to:
                    onward = message.model_copy(update={"deadline_s": remaining})
                    try:
                        self.send_call(onward if sign is None else sign(onward), target)
                    except BrokerUnavailable:
                        continue  # not re-sent: the next check tries again
                    sent_to = target

    def _claimed(self, call_id: str) -> bool | None:
        """Whether a worker claimed ``call_id`` (None: the ledger is unreachable)."""
        try:
            return self.ledger.claimed(call_id)
        except (redis.ConnectionError, redis.TimeoutError):
            return None

    def ask(
        self,
        task: str,
        args: list[Any],
        wait: float,
        queue: str | None = None,
        *,
        task_id: str | None = None,
        accept: Accept | None = None,
        abandon: Callable[[], bool] | None = None,
    ) -> str | None:
        """Send ``task`` and wait up to ``wait`` seconds for its answer (None: no answer).

        ``abandon`` is asked every :data:`REROUTE_CHECK_S` seconds while no answer has come;
        once it answers True the wait ends with None (the one worker that could answer is
        gone). ``accept``: see :meth:`wait_answer`.
        """
        task_id = task_id or uuid.uuid4().hex
        self.send(task, args, task_id, queue)
        deadline = time.monotonic() + wait
        step = wait if abandon is None else REROUTE_CHECK_S  # nothing to ask: one wait
        forged: ForgedResult | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                answer = self._wait(
                    task_id,
                    max(0.0, min(step, remaining)),
                    claimed=False,
                    streamed=False,
                    accept=accept,
                    reconnect_until=deadline,  # an outage is ridden out as without abandon
                )
            except ForgedResult as exc:
                forged, answer = exc, None  # the genuine answer may still come
            assert not isinstance(answer, Piece)  # only a streamed wait returns pieces
            if answer is not None:
                return answer
            if deadline - time.monotonic() <= 0 or (abandon is not None and abandon()):
                if forged is not None:
                    raise forged
                return None

    def result(self, call_id: str, wait: float, accept: Accept | None = None) -> str:
        """The result JSON of tool call ``call_id``, waiting up to ``wait`` seconds.

        Answers ``{"status": "lost"}`` when the call's worker died,
        ``{"status": "pending", "call_id": ...}`` when nothing came in time (call
        again with the same id to keep waiting), and ``{"status": "collected"}``
        when its result was handed out before: a result is handed out once.
        A broker that goes away while waiting is waited for; :class:`BrokerUnavailable`
        if it is still gone at the deadline.
        """
        value = self.wait_answer(call_id, wait, claimed=True, accept=accept)
        if value is not None:
            return value
        return self._pending(call_id, wait)

    def _pending(self, call_id: str, wait: float) -> str:
        return json.dumps(
            {
                "status": "pending",
                "error": f"no result within {wait:g}s: is an `sbx worker` running "
                f"for queue {self.settings.queue!r}? (call id {call_id})",
                "call_id": call_id,
            }
        )

    def close(self) -> None:
        """Release broker and ledger connections."""
        self.ledger.client.close()
        self.app.close()
