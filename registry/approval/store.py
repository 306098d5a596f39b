"""Approval state: pending approvals, once-grants and per-session pattern keys.

Contract of every :class:`ApprovalStore` (all methods thread-safe, atomic):

* ``create_or_get_pending(record, now)`` stores ``record`` unless a live
  pending approval already exists for the same (session, command); then that
  one is returned instead, so concurrent checks of one command yield one
  approval id (one prompt).
* ``get(approval_id)`` returns the record (any status) or None once it is gone.
* ``resolve(approval_id, approve, scope, session_id, now, once_ttl)`` moves a
  pending, unexpired record to ``approved``/``denied`` exactly once, and for an
  approval applies its store-side effect atomically with the transition:
  ``once`` grants one run of that exact command in that session, ``session``
  and ``always`` add the record's pattern keys to the session. Raises :class:`ApprovalError`
  subclasses for unknown, expired, already resolved or foreign approvals.
* ``consume_once(session_id, command, now)`` atomically takes a once-grant.
* ``session_keys``/``add_session_keys``/``clear_session`` manage session approvals.

Times are wall-clock seconds (records are shared between workers) passed in by
the caller, so tests inject a clock instead of sleeping.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ApprovalAlreadyResolvedError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalNotFoundError",
    "ApprovalSessionError",
    "ApprovalStore",
    "MemoryApprovalStore",
    "PendingApproval",
    "Scope",
    "command_digest",
]

Scope = Literal["once", "session", "always"]
Status = Literal["pending", "approved", "denied"]


class ApprovalError(Exception):
    """Base class of approval-resolution errors."""


class ApprovalNotFoundError(ApprovalError, LookupError):
    """No approval with that id (never existed, or already garbage-collected)."""


class ApprovalExpiredError(ApprovalError):
    """The approval was not answered in time; silence is not consent."""


class ApprovalAlreadyResolvedError(ApprovalError):
    """The approval was already approved or denied."""


class ApprovalSessionError(ApprovalError, PermissionError):
    """The approval belongs to another session."""


class PendingApproval(BaseModel):
    """A request for a person to approve one command in one session."""

    model_config = ConfigDict(frozen=True)

    approval_id: str
    session_id: str
    command: str
    pattern_key: str
    pattern_keys: tuple[str, ...] = ()
    description: str
    created_at: float
    expires_at: float
    status: Status = "pending"
    scope: Scope | None = None

    def expired(self, now: float) -> bool:
        """True once ``now`` reaches ``expires_at``."""
        return now >= self.expires_at


def command_digest(session_id: str, command: str) -> str:
    """Stable key of (session, exact command) used for dedup and once-grants."""
    h = hashlib.sha256()
    h.update(session_id.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(command.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@runtime_checkable
class ApprovalStore(Protocol):
    """Where approvals live; see the module docstring for the contract."""

    def create_or_get_pending(self, record: PendingApproval, *, now: float) -> PendingApproval: ...

    def get(self, approval_id: str) -> PendingApproval | None: ...

    def resolve(
        self,
        approval_id: str,
        *,
        approve: bool,
        scope: Scope | None,
        session_id: str | None,
        now: float,
        once_ttl: float,
    ) -> PendingApproval: ...

    def consume_once(self, session_id: str, command: str, *, now: float) -> bool: ...

    def session_keys(self, session_id: str) -> frozenset[str]: ...

    def add_session_keys(self, session_id: str, keys: Iterable[str]) -> None: ...

    def clear_session(self, session_id: str) -> None: ...

    def always_allowed(self, command: str) -> bool: ...


ALWAYS = "*"
"""The "session" of an approved-always command: every session (the exact command only)."""


def check_resolvable(
    record: PendingApproval | None, approval_id: str, session_id: str | None, now: float
) -> PendingApproval:
    """Raise the matching :class:`ApprovalError` unless ``record`` can be resolved now."""
    if record is None:
        raise ApprovalNotFoundError(f"no approval {approval_id!r}")
    if session_id is not None and record.session_id != session_id:
        raise ApprovalSessionError(f"approval {approval_id!r} belongs to another session")
    if record.status != "pending":
        raise ApprovalAlreadyResolvedError(f"approval {approval_id!r} is already {record.status}")
    if record.expired(now):
        raise ApprovalExpiredError(f"approval {approval_id!r} expired")
    return record


class MemoryApprovalStore:
    """In-process :class:`ApprovalStore` guarded by one lock.

    Resolved and expired records are kept until ``retention`` seconds after
    they expire so a late caller learns "expired"/"denied" rather than "unknown";
    sweeping happens at most once a minute, on writes.
    """

    def __init__(self, *, retention: float = 3600.0) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, PendingApproval] = {}
        self._dedup: dict[str, str] = {}
        self._once: dict[str, tuple[str, float]] = {}  # digest -> (session, expires_at)
        self._sessions: dict[str, set[str]] = {}
        self._always: set[str] = set()
        self._retention = retention
        self._last_sweep = 0.0

    def _sweep(self, now: float) -> None:
        if now - self._last_sweep < 60.0:
            return
        self._last_sweep = now
        dead = [k for k, r in self._records.items() if now >= r.expires_at + self._retention]
        for k in dead:
            del self._records[k]
        self._dedup = {d: a for d, a in self._dedup.items() if a in self._records}
        self._once = {d: v for d, v in self._once.items() if v[1] > now}

    def create_or_get_pending(self, record: PendingApproval, *, now: float) -> PendingApproval:
        digest = command_digest(record.session_id, record.command)
        with self._lock:
            self._sweep(now)
            existing_id = self._dedup.get(digest)
            if existing_id is not None:
                existing = self._records.get(existing_id)
                if (
                    existing is not None
                    and existing.status == "pending"
                    and not existing.expired(now)
                ):
                    return existing
            self._records[record.approval_id] = record
            self._dedup[digest] = record.approval_id
            return record

    def get(self, approval_id: str) -> PendingApproval | None:
        with self._lock:
            return self._records.get(approval_id)

    def resolve(
        self,
        approval_id: str,
        *,
        approve: bool,
        scope: Scope | None,
        session_id: str | None,
        now: float,
        once_ttl: float,
    ) -> PendingApproval:
        with self._lock:
            record = check_resolvable(self._records.get(approval_id), approval_id, session_id, now)
            status: Status = "approved" if approve else "denied"
            updated = record.model_copy(
                update={"status": status, "scope": scope if approve else None}
            )
            self._records[approval_id] = updated
            digest = command_digest(record.session_id, record.command)
            if self._dedup.get(digest) == approval_id:
                del self._dedup[digest]
            if approve and scope == "once":
                self._once[digest] = (record.session_id, now + once_ttl)
            elif approve and scope == "session":
                self._sessions.setdefault(record.session_id, set()).update(
                    record.pattern_keys or (record.pattern_key,)
                )
            elif approve and scope == "always":
                self._always.add(command_digest(ALWAYS, record.command))
            return updated

    def always_allowed(self, command: str) -> bool:
        with self._lock:
            return command_digest(ALWAYS, command) in self._always

    def consume_once(self, session_id: str, command: str, *, now: float) -> bool:
        digest = command_digest(session_id, command)
        with self._lock:
            grant = self._once.pop(digest, None)
            return grant is not None and grant[1] > now

    def session_keys(self, session_id: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._sessions.get(session_id, ()))

    def add_session_keys(self, session_id: str, keys: Iterable[str]) -> None:
        with self._lock:
            self._sessions.setdefault(session_id, set()).update(keys)

    def clear_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)
            self._once = {d: v for d, v in self._once.items() if v[0] != session_id}
