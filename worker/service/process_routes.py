"""Where a session's processes are answered: their routes in the ledger.

A running process is routed to the worker holding it (``sbx:process:<id>`` ->
``{"queue", "session", "worker"}``, its own queue), so clients send later actions
there; the session's index (``sbx:session:<id>:processes``) names its routed
processes, so finding a session's processes reads that session's routes only, however
many the fleet runs. A finished process is only a receipt: its route goes (any worker on
that home answers from the receipt) and a receipt route says which worker's home holds
it. Ledger errors are logged, never raised: a missing route costs a forward, not
a call.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis

from process_registry.receipts import DEFAULT_MAX_AGE
from worker.protocol.ledger import parse_route, receipt_route_key, route_key
from worker.protocol.receipt_homes import receipt_homes_key

log = logging.getLogger(__name__)

_MAX_AGE_S = int(DEFAULT_MAX_AGE)


def session_index_key(session_id: str) -> str:
    """Redis set of the ids of ``session_id``'s routed (running) processes."""
    return f"sbx:session:{session_id}:processes"


def session_routes(client: redis.Redis, session_id: str) -> dict[str, dict[str, str]]:
    """The routes of ``session_id``'s running processes by process id, in two round trips
    (an index entry whose route is gone is skipped: the index expires with its last
    route). Raises ``redis.RedisError``."""
    members: Any = client.smembers(session_index_key(session_id))
    ids = [m.decode() if isinstance(m, bytes) else str(m) for m in members]
    if not ids:
        return {}
    raws: list[Any] = client.mget([route_key(i) for i in ids])
    routes: dict[str, dict[str, str]] = {}
    for process_id, raw in zip(ids, raws, strict=True):
        route = parse_route(raw)
        if route is not None and route.get("session") == session_id:
            routes[process_id] = route
    return routes


class ProcessRoutes:
    """The routes of one worker's processes (none without a ledger or an own queue)."""

    def __init__(
        self,
        client: redis.Redis | None,
        worker_queue: str | None,
        worker_id: str,
        receipt_ttl_s: int,
        home_id: str = "",
    ) -> None:
        """``home_id``: this worker's home (:func:`~worker.protocol.receipt_homes.home_id`)."""
        self.client = client
        self.worker_queue = worker_queue
        self.worker_id = worker_id
        self.receipt_ttl_s = receipt_ttl_s
        self.home_id = home_id

    def _where(self, session_id: str) -> str:
        return json.dumps(
            {"queue": self.worker_queue, "session": session_id, "worker": self.worker_id}
        )

    def record(self, process_id: str, session_id: str) -> None:
        """Route ``process_id`` (running, owned by ``session_id``) to this worker."""
        if self.client is None or self.worker_queue is None:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.set(route_key(process_id), self._where(session_id), ex=_MAX_AGE_S)
            pipe.sadd(session_index_key(session_id), process_id)
            pipe.expire(session_index_key(session_id), _MAX_AGE_S)
            pipe.execute()
        except redis.RedisError:
            log.warning("could not record the route of %s", process_id, exc_info=True)

    def finished(self, process_id: str, owner: str) -> None:
        """``process_id`` is a receipt now: drop its route, record where the receipt is."""
        if self.client is None:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(route_key(process_id))
            pipe.srem(session_index_key(owner), process_id)
            if self.worker_queue is not None:
                pipe.set(receipt_route_key(process_id), self._where(owner), ex=self.receipt_ttl_s)
                self._serve_home(pipe, owner)
            pipe.execute()
        except redis.RedisError:
            log.warning("could not drop the route of %s", process_id, exc_info=True)

    def serve_receipts_of(self, sessions: list[str]) -> None:
        """At start-up: this worker now answers for the receipts its home keeps of
        ``sessions`` (a worker restarted on the home has another queue)."""
        if self.client is None or self.worker_queue is None or not self.home_id:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for session in sessions:
                self._serve_home(pipe, session)
            pipe.execute()
        except redis.RedisError:
            log.warning("could not announce the receipts this home keeps", exc_info=True)

    def _serve_home(self, pipe: Any, session_id: str) -> None:
        if self.home_id:
            pipe.hset(receipt_homes_key(session_id), self.home_id, self._where(session_id))
            pipe.expire(receipt_homes_key(session_id), self.receipt_ttl_s)
