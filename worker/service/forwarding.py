"""Process actions that reach a worker which does not hold the process.

A background process lives on one worker; its route ``sbx:process:<id>``
names that worker's own queue (``worker.service.processes``). ``SandboxClient`` sends
actions there directly, but any other caller (a platform publishing to the
shared queue, several workers behind one queue) may reach another worker.
That worker forwards, as the same verified session:

* a single-process action (poll, log, wait, kill, write) to the holder's
  queue, returning the holder's answer as its own;
* ``list`` to every other worker holding a process of the session, merging
  the answers with its own.

Contracts: a forwarded call is marked (``ToolCallMessage.forwarded``) and is
never forwarded again. A holder that does not take a forwarded call within
:data:`TAKEN_WITHIN_S` is reported as not answering (it may have died; a
restarted worker adopts its processes) and the forwarded call is cancelled, so
it never runs later; the caller is not held to its whole deadline.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from worker.broker.sender import CallSender
from worker.protocol.ledger import claim_key, read_route
from worker.protocol.mac import answer_opener, message_body, prove
from worker.protocol.messages import ToolCallMessage
from worker.protocol.revocations import read_epoch
from worker.service.process_routes import session_routes

if TYPE_CHECKING:
    from worker.service.runtime import WorkerRuntime

log = logging.getLogger(__name__)

TAKEN_WITHIN_S = 10.0
"""How long a holder may take to start a forwarded action before it counts as gone."""


class ProcessForwarder:
    """Forwards process actions from this worker (own queue ``own_queue``) to their holders."""

    def __init__(self, runtime: WorkerRuntime, own_queue: str) -> None:
        self.runtime = runtime
        self.own_queue = own_queue
        self._sender: CallSender | None = None
        self._lock = threading.Lock()

    def _get_sender(self) -> CallSender:
        """A sender on the worker's broker and ledger (made on first use)."""
        with self._lock:
            if self._sender is None:
                rt = self.runtime
                self._sender = CallSender(rt.broker_url, rt.ledger_url, rt.settings)
            return self._sender

    def holder_queue(self, process_id: str, session_id: str) -> str | None:
        """The queue of the other, present worker holding ``process_id`` of ``session_id``
        (None: none, this one, one that is gone -- see :meth:`absent_holder` -- or a
        process of another session: that answers here, exactly as an unknown id does)."""
        route = read_route(self.runtime.ledger.client, process_id)
        if not route or route.get("session") != session_id:
            return None
        queue = route["queue"]
        if not queue or queue == self.own_queue or self.absent_holder(process_id, route):
            return None
        return queue

    def absent_holder(
        self, process_id: str, route: dict[str, str] | None = None
    ) -> str | None:
        """The worker id named by the process's route when that worker is no longer
        present (it died or stopped); None otherwise."""
        if route is None:
            route = read_route(self.runtime.ledger.client, process_id)
        worker = (route or {}).get("worker")
        leases = self.runtime.leases
        if not worker or leases is None or worker == self.runtime.worker_id:
            return None
        return None if leases.book.present(worker) else worker

    def session_queues(self, session_id: str) -> set[str]:
        """Queues of the other workers holding a running process of ``session_id``."""
        routes = session_routes(self.runtime.ledger.client, session_id)
        return {r["queue"] for r in routes.values() if r["queue"] != self.own_queue}

    def forward(
        self, queue: str, args: dict[str, Any], session_id: str, backend: str, wait: float
    ) -> dict[str, Any]:
        """Run ``process`` with ``args`` for ``session_id`` on the worker of ``queue``."""
        sender = self._get_sender()
        call_id = uuid.uuid4().hex
        message = ToolCallMessage(
            call_id=call_id,
            session_id=session_id,
            tool="process",
            args=args,
            backend=backend,
            deadline_s=max(1.0, wait),
            forwarded=True,
        )
        # Acting as the (verified) session: a short-lived token of its current epoch.
        rt = self.runtime
        epoch = read_epoch(rt.ledger.client, session_id, rt.settings.home)
        token = rt.signer.token(session_id, ttl=max(60.0, wait + 60.0), epoch=epoch)
        message = message.model_copy(update={"proof": prove(token, message_body("call", message))})
        accept = answer_opener(token, call_id)
        sender.send_call(message, queue)
        first = min(wait, TAKEN_WITHIN_S)
        answer = sender.wait_answer(call_id, first, claimed=True, accept=accept)
        if answer is None and sender.ledger.client.exists(claim_key(call_id)):
            answer = sender.wait_answer(call_id, max(0.0, wait - first), claimed=True,
                                        accept=accept)  # fmt: skip
        if answer is None:
            sender.cancel(call_id)
            log.warning("worker queue %s did not take a forwarded process action", queue)
            return {
                "error": f"the worker holding this process (queue {queue}) did not answer; "
                "it may have stopped: a restarted worker adopts its processes",
                "status": "error",
            }
        value = json.loads(answer)
        return value if isinstance(value, dict) else {"error": "bad answer", "status": "error"}

    def close(self) -> None:
        with self._lock:
            if self._sender is not None:
                self._sender.close()
                self._sender = None
