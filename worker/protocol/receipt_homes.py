"""Which workers' homes keep a session's receipts, so a fleet's auditor sees all of them.

Each worker keeps the receipts it writes in its own ``SBX_HOME`` (one chain per session
per home). The ledger hash ``sbx:session:<id>:receipt-homes`` maps a home id (host and
real path of the ``SBX_HOME``) to the route (``{"queue", "session", "worker"}``) of the
worker that last served that home: set when one of the session's receipts is written
there, and again by a worker starting on that home. ``sbx receipts list|verify`` ask
every home of the session rather than whichever worker takes the shared queue.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import redis

from worker.protocol.ledger import parse_route


def receipt_homes_key(session_id: str) -> str:
    """Redis hash: home id -> route of the worker serving that home's receipts."""
    return f"sbx:session:{session_id}:receipt-homes"


def home_id(home: Path) -> str:
    """A stable id of the ``SBX_HOME`` ``home`` on this host (the same after a restart)."""
    where = f"{socket.gethostname()}\0{os.path.realpath(home)}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def read_receipt_homes(client: redis.Redis, session_id: str) -> dict[str, dict[str, str]]:
    """The routes of the homes keeping ``session_id``'s receipts, by home id (garbage
    entries skipped). Raises ``redis.RedisError``."""
    raw: dict[bytes | str, bytes | str] = client.hgetall(receipt_homes_key(session_id))  # type: ignore[assignment]
    homes: dict[str, dict[str, str]] = {}
    for key, value in raw.items():
        route = parse_route(value)
        if route is not None and route.get("session") == session_id:
            homes[key.decode() if isinstance(key, bytes) else key] = route
    return homes
