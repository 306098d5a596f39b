"""Observing tracked processes: owner checks, poll, wait, list, linger and log reads.

The observing half of :class:`~process_registry.table.ProcessTable`. Every method
takes the caller's already verified session id; live processes answer their
owner only (:class:`~process_registry.models.PermissionDenied` otherwise), and a
process this worker no longer tracks answers from its receipt, which its owner
or its compression continuation may read.
"""

from __future__ import annotations

import builtins
import time

from .atomic import validate_id
from .in_context import CONTEXT_BYTES
from .models import MAX_OFFSET, InvalidRead, LogChunk, PermissionDenied, ProcessInfo
from .tracking import (
    Tracked,
    TrackedProcesses,
    info_from_receipt,
    live_chunk,
    live_info,
    make_chunk,
)


class ProcessObserving(TrackedProcesses):
    """Reading the state and output of tracked processes (see the module docstring)."""

    redact_live: bool

    def check_owner(self, process_id: str, session_id: str) -> None:
        """Return when ``session_id`` owns ``process_id`` (running, or only a receipt left);
        raise :class:`PermissionDenied` or :class:`NotFound` otherwise."""
        if self._owned(process_id, session_id) is None:
            self.receipts.read(process_id, session_id, verified=False)

    def _owned(self, process_id: str, session_id: str) -> Tracked | None:
        """The tracked process if ``session_id`` owns it; None when only a receipt remains."""
        validate_id(process_id, "process id")
        with self._lock:
            t = self._live.get(process_id) or self._finished.get(process_id)
        if t is None:
            return None
        if t.record.owner_session_id != session_id:
            raise PermissionDenied(f"session does not own process {process_id}")
        return t

    def poll(self, process_id: str, session_id: str) -> ProcessInfo:
        """Current state of a process (or its receipt once it is only a receipt)."""
        t = self._owned(process_id, session_id)
        if t is not None:
            return live_info(t)
        return info_from_receipt(self.receipts.read(process_id, session_id))

    def wait(self, process_id: str, session_id: str, timeout: float | None = None) -> ProcessInfo:
        """Block until the process ended (its receipt is written) or ``timeout`` passed."""
        t = self._owned(process_id, session_id)
        if t is None:
            return self.poll(process_id, session_id)
        t.done.wait(timeout)
        return live_info(t)

    def _mine(self, session_id: str) -> builtins.list[Tracked]:
        with self._lock:
            return [
                t
                for t in [*self._live.values(), *self._finished.values()]
                if t.record.owner_session_id == session_id
            ]

    def linger(self, session_id: str, timeout: float) -> builtins.list[ProcessInfo]:
        """Wait (at most ``timeout`` s in all) for the session's processes; return them all."""
        deadline = time.monotonic() + timeout
        mine = self._mine(session_id)
        for t in mine:
            t.done.wait(max(0.0, deadline - time.monotonic()))
        return [live_info(t) for t in mine]

    def list(self, session_id: str) -> builtins.list[ProcessInfo]:
        """Processes this worker tracks (running and recently finished) owned by ``session_id``."""
        mine = sorted(self._mine(session_id), key=lambda t: t.record.started_at)
        return [live_info(t) for t in mine]

    def log(
        self, process_id: str, session_id: str, offset: int = 0, limit: int = 65536
    ) -> LogChunk:
        """Output from byte ``offset`` (at most ``limit`` bytes); see :class:`LogChunk`.

        With ``redact_live`` the window is redacted in its context (the bytes
        around it, :mod:`process_registry.in_context`), so whatever ``offset``
        and ``limit`` split, no part of a secret comes back; a running
        process's unfinished last line is held back until it ends (or grows
        long). A read below the head the output cap discarded starts after it
        (see ``LogChunk.discarded_before``); it never returns bytes of that head.
        Raises :class:`InvalidRead` for a negative or out-of-range offset or limit.
        """
        if not 0 <= offset <= MAX_OFFSET or not 0 < limit <= MAX_OFFSET:
            raise InvalidRead(f"offset must be 0-{MAX_OFFSET} and limit 1-{MAX_OFFSET}")
        t = self._owned(process_id, session_id)
        if t is not None:
            chunk = live_chunk(t, offset, limit, redact_live=self.redact_live)
            if chunk is not None:
                return chunk
        receipt = self.receipts.read(process_id, session_id)
        body = receipt.output.encode()
        low, high = max(0, offset - CONTEXT_BYTES), offset + limit
        return make_chunk(process_id, body[offset:high], offset, limit, ended=True,
                          status=receipt.status, redact_live=self.redact_live,
                          total=len(body), before=body[low:offset],
                          after=body[high : high + CONTEXT_BYTES])  # fmt: skip
