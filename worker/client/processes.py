"""Typed background-process and receipt helpers, mixed into ``SandboxClient``.

Contracts:

* Process actions are ``process`` tool calls; receipt and continuation operations
  are ``sbx.receipt_op`` tasks. Both carry this client's session id and a proof
  made with its token (``worker.client.auth``); the worker verifies it and
  seals its answer.
* Routing: an action on a known process goes to the queue of the worker that
  holds it (``sbx:process:<id>`` in the broker's Redis, written by the worker
  at start and adoption); otherwise to the shared queue.
* Helpers return pydantic models (``worker.protocol.process_messages``) and raise
  :class:`~worker.errors.ProcessError` for an error result, whose
  ``status`` is ``denied`` (CLI exit 3), ``not_found`` (4), ``invalid``,
  ``pending`` (no worker answered), ``gone`` (the one worker that could answer died
  while it was asked) or ``error``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from worker.client.budget import ANSWER_SLACK_S
from worker.protocol.errors import CallError, ProcessError
from worker.protocol.ledger import read_route
from worker.protocol.process_messages import (
    Continuation,
    ProcessLog,
    ProcessStarted,
    ProcessStatus,
    ProcessWrite,
    Receipt,
    ReceiptOpMessage,
    VerifyReport,
)
from worker.protocol.tasks import RECEIPT_OP_TASK

if TYPE_CHECKING:
    from worker.broker.sender import CallSender
    from worker.client.auth import ClientAuth
    from worker.client.sync import SandboxClient
    from worker.protocol.ledger import CallLedger
    from worker.settings import Settings

_WAIT_SLACK_S = 3.0
"""What ``wait`` adds to the caller's own timeout: the worker answers at the timeout."""


def parse_answer(raw: str, error: type[CallError] = ProcessError) -> dict[str, Any]:
    """The JSON object a worker answered; ``error`` raised for an error or a refusal."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise error(f"the worker answered with non-JSON: {raw[:200]!r}") from None
    if not isinstance(value, dict):
        raise error(f"unexpected answer: {raw[:200]!r}")
    if value.get("error"):
        raise error(str(value["error"]), str(value.get("status") or "error"), value)
    if value.get("status") in ("approval_required", "blocked"):
        message = value.get("description") or value.get("status")
        raise error(str(message), str(value["status"]), value)
    return value


class ProcessClientMixin:
    """Process, receipt and session helpers; needs the ``SandboxClient`` attributes below."""

    if TYPE_CHECKING:
        sender: CallSender
        settings: Settings
        session_id: str
        auth: ClientAuth
        backend: str | None
        ledger: CallLedger

    def _host(self) -> Any:
        """``self`` as the SandboxClient it is mixed into (``tool_call``, ``result``)."""
        return self

    # -- routing ---------------------------------------------------------------------------

    def process_queue(self, process_id: str) -> str | None:
        """The queue of the present worker holding ``process_id``, else of the one whose
        home holds its receipt (None: the shared queue -- also when that worker is gone:
        the worker that takes the action adopts the process or answers for it)."""
        return self.process_route(process_id)[0]

    def process_route(self, process_id: str) -> tuple[str | None, str | None]:
        """``(queue, worker)``: :meth:`process_queue` and the worker whose own queue it is
        (``(None, None)``: the shared queue)."""
        try:
            for receipt in (False, True):
                route = read_route(self.ledger.client, process_id, receipt=receipt)
                if route is None:
                    continue
                worker = route.get("worker")
                if worker and not self.sender.leases.present(worker):
                    continue
                return str(route["queue"]), (str(worker) if worker else None)
        except Exception:
            return None, None
        return None, None

    def _process(self, args: dict[str, Any], *, wait: float = ANSWER_SLACK_S) -> dict[str, Any]:
        """One ``process`` action, sent where its process lives (``tool_call`` routes it)."""
        return parse_answer(str(self._host().tool_call("process", args, wait=wait)))

    # -- processes -------------------------------------------------------------------------

    def start(
        self, command: str, *, workdir: str | None = None, pty: bool = False
    ) -> ProcessStarted:
        """Start ``command`` in the background in this session's sandbox."""
        args: dict[str, Any] = {"command": command, "background": True}
        if workdir is not None:
            args["workdir"] = workdir
        if pty:
            args["pty"] = True
        return ProcessStarted.model_validate(
            parse_answer(self._host().tool_call("terminal", args, wait=60.0))
        )

    def poll(self, process_id: str) -> ProcessStatus:
        """Status and output tail of one of this session's processes."""
        return ProcessStatus.model_validate(
            self._process({"action": "poll", "process_id": process_id})
        )

    def logs(self, process_id: str, offset: int = 0, limit: int = 65536) -> ProcessLog:
        """Output from byte ``offset`` (at most ``limit`` bytes)."""
        args = {"action": "log", "process_id": process_id, "offset": offset, "limit": limit}
        return ProcessLog.model_validate(self._process(args))

    def wait(self, process_id: str, timeout: float | None = None) -> ProcessStatus:
        """Block until the process ends or ``timeout`` s pass (status ``running`` then)."""
        limit = self.settings.max_timeout
        seconds = limit if timeout is None else max(0, min(int(timeout), limit))
        args = {"action": "wait", "process_id": process_id, "timeout": seconds}
        # The caller's timeout bounds the whole wait: the worker answers at it (``running``
        # still), and a worker gone meanwhile is routed around within it.
        return ProcessStatus.model_validate(self._process(args, wait=seconds + _WAIT_SLACK_S))

    def kill(self, process_id: str) -> ProcessStatus:
        """Terminate the process and its children; its final status."""
        return ProcessStatus.model_validate(
            self._process({"action": "kill", "process_id": process_id})
        )

    def write(self, process_id: str, data: str) -> ProcessWrite:
        """Type ``data`` into a process started with ``pty=True``."""
        args = {"action": "write", "process_id": process_id, "data": data}
        return ProcessWrite.model_validate(self._process(args))

    def processes(self) -> list[ProcessStatus]:
        """This session's processes known to the worker answering."""
        value = self._process({"action": "list"})
        return [ProcessStatus.model_validate(p) for p in value.get("processes", [])]

    def linger(self, timeout: float) -> list[ProcessStatus]:
        """Wait, at most ``timeout`` seconds in all, for this session's running processes.

        For one-shot callers that started background processes and must not exit
        before those finish. Returns every process's last status (``running`` for
        those still going at the deadline).
        """
        deadline = time.monotonic() + max(0.0, timeout)
        final = []
        for p in self.processes():
            if p.status == "running":
                p = self.wait(p.process_id, timeout=max(0.0, deadline - time.monotonic()))
            final.append(p)
        return final

    # -- receipts and sessions -------------------------------------------------------------

    def receipt_op(
        self,
        op: str,
        *,
        queue: str | None = None,
        wait: float = ANSWER_SLACK_S,
        child: ClientAuth | None = None,
        worker: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Run one ``sbx.receipt_op`` as this session; the parsed answer.

        ``child``: the credentials of the session a ``continue`` names (its consent).
        ``worker``: the only worker that can answer (``queue`` is its own): once it is no
        longer present the wait ends with :class:`ProcessError` ``gone``.
        """
        message = ReceiptOpMessage.model_validate(
            {"session_id": self.session_id, "call_id": uuid.uuid4().hex, "op": op, **fields}
        )
        message, accept = self.auth.sign("receipt-op", message)
        if child is not None:
            message = message.model_copy(
                update={"child_proof": child.prove("receipt-op", message)[0]}
            )
        gone = None if worker is None else functools.partial(self._gone, worker)
        raw = self._host().ask(RECEIPT_OP_TASK, [message.model_dump(mode="json")], wait, queue,
                               task_id=message.call_id, accept=accept, abandon=gone)  # fmt: skip
        if raw is None and gone is not None and gone():
            raise ProcessError(
                f"worker {worker} died before it answered: no running worker serves its home",
                "gone",
            )
        if raw is None:
            raise ProcessError(
                f"no worker answered within {wait:g}s: is an `sbx worker` running?", "pending"
            )
        return parse_answer(raw)

    def _gone(self, worker: str) -> bool:
        """True once ``worker`` is no longer present; a ledger that cannot be asked now
        says nothing (the wait goes on, riding out the outage as it would anyway)."""
        try:
            return not self.sender.leases.present(worker)
        except Exception:
            return False

    def receipt(self, process_id: str) -> Receipt:
        """The receipt of a finished process this session (or its predecessor) owns.

        :class:`ProcessError` ``gone`` when the worker of the home keeping it dies while
        it is asked (before its presence expired it was still the one to ask)."""
        queue, worker = self.process_route(process_id)
        value = self.receipt_op("receipt_show", process_id=process_id, queue=queue, worker=worker)
        return Receipt.model_validate(value["receipt"])

    def receipt_homes(self) -> tuple[list[tuple[str | None, str | None]], list[str]]:
        """``(homes, gone)``: ``(queue, worker)`` of each home keeping this session's
        receipts that a running worker serves (:mod:`worker.protocol.receipt_homes`;
        ``[(None, None)]``, the shared queue, when none is known), and the workers of homes
        no running worker serves."""
        from worker.protocol.receipt_homes import read_receipt_homes  # only receipt reads

        try:
            homes = read_receipt_homes(self.ledger.client, self.session_id)
        except Exception:
            return [(None, None)], []
        served: list[tuple[str | None, str | None]] = []
        gone: list[str] = []
        for route in homes.values():
            worker = route.get("worker")
            if worker and not self.sender.leases.present(worker):
                gone.append(worker)
            else:
                served.append((route["queue"], worker or None))
        return (served or [(None, None)]), gone

    def receipts(self) -> list[Receipt]:
        """Every receipt this session may read on every home that keeps some, oldest
        first (a home no running worker serves cannot be read, nor one whose worker dies
        while it is asked: ``verify`` says so)."""
        found: dict[str, Receipt] = {}
        for queue, worker in self.receipt_homes()[0]:
            try:
                listed = self.receipt_op("receipts_list", queue=queue, worker=worker)
            except ProcessError as exc:
                if exc.status != "gone":
                    raise
                continue
            for r in listed["receipts"]:
                receipt = Receipt.model_validate(r)
                found[receipt.process_id] = receipt
        return sorted(found.values(), key=lambda r: (r.ended_at, r.seq))

    def verify_receipts(self) -> list[str]:
        """Integrity problems in the receipts this session may read, on every home that
        keeps some (empty: all intact); a home no running worker serves is a problem, and
        so is one whose worker dies while it is asked."""
        homes, gone = self.receipt_homes()
        problems: list[str] = []
        for queue, worker in homes:
            try:
                report = self.receipt_op("receipts_verify", queue=queue, worker=worker)
            except ProcessError as exc:
                if exc.status != "gone" or worker is None:
                    raise  # "gone" comes only with a worker: the check keeps mypy's type
                gone.append(worker)
                continue
            for problem in VerifyReport.model_validate(report).problems:
                if problem not in problems:
                    problems.append(problem)
        problems += [
            f"{self.session_id}: the receipts kept by worker {w} were not checked "
            "(no running worker serves its home)"
            for w in gone
        ]
        return problems

    def prune_receipts(self) -> int:
        """Apply retention now; how many receipts were deleted."""
        return int(self.receipt_op("receipts_prune")["pruned"])

    def continue_session(self, child_id: str, child_token: str | None = None) -> Continuation:
        """Record that ``child_id`` continues this session: this client holds the parent's
        token, and ``child_token`` (the child's consent: ``SBX_CHILD_SESSION_TOKEN``, or
        minted from the local keyring when None) proves the child agrees."""
        from worker.client.auth import client_auth

        secret = self.settings.child_session_token
        given = child_token or (secret.get_secret_value() if secret is not None else None)
        child = client_auth(self.settings, child_id, given, self.ledger.client)
        return Continuation.model_validate(
            self.receipt_op("continue", child_id=child_id, child=child)
        )


class AsyncProcessClientMixin:
    """``asyncio`` face of :class:`ProcessClientMixin` over ``self._sync`` (a SandboxClient)."""

    if TYPE_CHECKING:
        _sync: SandboxClient

    async def start(
        self, command: str, *, workdir: str | None = None, pty: bool = False
    ) -> ProcessStarted:
        return await asyncio.to_thread(self._sync.start, command, workdir=workdir, pty=pty)

    async def poll(self, process_id: str) -> ProcessStatus:
        return await asyncio.to_thread(self._sync.poll, process_id)

    async def logs(self, process_id: str, offset: int = 0, limit: int = 65536) -> ProcessLog:
        return await asyncio.to_thread(self._sync.logs, process_id, offset, limit)

    async def wait(self, process_id: str, timeout: float | None = None) -> ProcessStatus:
        return await asyncio.to_thread(self._sync.wait, process_id, timeout)

    async def kill(self, process_id: str) -> ProcessStatus:
        return await asyncio.to_thread(self._sync.kill, process_id)

    async def write(self, process_id: str, data: str) -> ProcessWrite:
        return await asyncio.to_thread(self._sync.write, process_id, data)

    async def processes(self) -> list[ProcessStatus]:
        return await asyncio.to_thread(self._sync.processes)

    async def receipt(self, process_id: str) -> Receipt:
        return await asyncio.to_thread(self._sync.receipt, process_id)

    async def receipts(self) -> list[Receipt]:
        return await asyncio.to_thread(self._sync.receipts)

    async def verify_receipts(self) -> list[str]:
        return await asyncio.to_thread(self._sync.verify_receipts)

    async def continue_session(self, child_id: str, child_token: str | None = None) -> Continuation:
        return await asyncio.to_thread(self._sync.continue_session, child_id, child_token)


__all__ = ["AsyncProcessClientMixin", "ProcessClientMixin", "ProcessError"]
