"""One client per sbx session the MCP server serves, opened on first use.

A :class:`~worker.client.SandboxClient` holds broker and ledger connections, so it is
kept while its session keeps calling: :class:`SessionClients` keeps at most ``keep``
of them, closing the least recently used idle one beyond that, and all on close.
"""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import anyio.to_thread

from worker.client import SandboxClient
from worker.integrations.session_calls import SessionCalls
from worker.mcp_server.identity import Identity
from worker.settings import Settings

DEFAULT_KEEP = 64
"""Idle sessions whose clients stay open."""


@dataclass
class _Entry:
    calls: SessionCalls
    in_use: int = 0


class SessionClients:
    """Clients by identity; ``backend`` is the backend every call names (None: the default)."""

    def __init__(
        self, settings: Settings, backend: str | None, *, keep: int = DEFAULT_KEEP
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.keep = keep
        self._entries: OrderedDict[Identity, _Entry] = OrderedDict()
        self._lock: anyio.Lock | None = None

    @contextlib.asynccontextmanager
    async def session(self, identity: Identity) -> AsyncIterator[SessionCalls]:
        """The calls of ``identity``'s session, open for the duration of the block.

        Raises what :class:`SandboxClient` raises when it cannot be set up
        (:class:`~worker.errors.TokenRequired`, ...).
        """
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            entry = self._entries.get(identity)
            if entry is None:
                opener = functools.partial(
                    SandboxClient, None, identity.session_id, identity.token,
                    backend=self.backend, settings=self.settings,
                )  # fmt: skip
                entry = _Entry(SessionCalls(await anyio.to_thread.run_sync(opener)))
                self._entries[identity] = entry
            self._entries.move_to_end(identity)
            entry.in_use += 1
            idle = self._evictable()
        await _close(idle)
        try:
            yield entry.calls
        finally:
            entry.in_use -= 1

    def _evictable(self) -> list[SandboxClient]:
        """Remove and return the least recently used idle clients beyond ``keep``."""
        excess = len(self._entries) - self.keep
        gone: list[SandboxClient] = []
        for identity, entry in list(self._entries.items()):
            if excess <= 0:
                break
            if entry.in_use == 0:
                del self._entries[identity]
                gone.append(entry.calls.client)
                excess -= 1
        return gone

    async def aclose(self) -> None:
        """Close every client (calls still running keep theirs until they return)."""
        clients = [e.calls.client for e in self._entries.values()]
        self._entries.clear()
        await _close(clients)


async def _close(clients: list[SandboxClient]) -> None:
    for client in clients:
        await anyio.to_thread.run_sync(client.close)
