"""asyncssh plumbing for the ssh backend: an event loop thread, pooled connections, channels.

asyncssh is asyncio-only while :class:`~environments.shell.driver.SessionShell` is
synchronous. One daemon thread runs an event loop for the whole process;
sandboxes talk to it with ``run_coroutine_threadsafe`` (setup, helper
commands) and, on the hot path, with ``call_soon_threadsafe`` plus a
thread-safe queue (a warm call costs a few microseconds of hand-off).

Connections are cached per (host, port, user, key, known_hosts) and shared by
sessions, at most ``max_channels`` channels each (OpenSSH's ``MaxSessions``
defaults to 10); a connection that dropped is replaced on the next acquire.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncssh

from environments.shell.queued import ClosesOnce, QueuedOutput

T = TypeVar("T")
_READ_SIZE = 1 << 16


class _LoopThread:
    """One asyncio loop in a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="sbx-ssh-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (never call from the loop)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise


LOOP = _LoopThread()


@dataclass(frozen=True)
class ConnectionKey:
    """What makes two sandboxes able to share an SSH connection."""

    host: str
    port: int
    user: str
    key_file: str | None
    known_hosts: str
    use_agent: bool


@dataclass(eq=False)
class PooledConnection:
    """A live connection and how many channels sandboxes hold on it."""

    conn: asyncssh.SSHClientConnection
    channels: int = 0

    @property
    def usable(self) -> bool:
        return not self.conn.is_closed()


@dataclass
class ConnectionPool:
    """Connections per key; :meth:`acquire` hands out one with a free channel slot."""

    connections: dict[ConnectionKey, list[PooledConnection]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(
        self,
        key: ConnectionKey,
        max_channels: int,
        connect: Coroutine[Any, Any, Any],
        timeout: float,
    ) -> PooledConnection:
        """A connection with a free channel slot, counting the new channel; may connect.

        ``connect`` (a coroutine returning an ``SSHClientConnection``) is awaited
        only when no cached connection has room; otherwise it is closed unused.
        """
        with self.lock:
            conns = self.connections.setdefault(key, [])
            conns[:] = [c for c in conns if c.usable or c.channels > 0]
            for pooled in conns:
                if pooled.usable and pooled.channels < max_channels:
                    pooled.channels += 1
                    connect.close()
                    return pooled
        conn = LOOP.run(connect, timeout)
        pooled = PooledConnection(conn, channels=1)
        with self.lock:
            self.connections.setdefault(key, []).append(pooled)
        return pooled

    def release(self, pooled: PooledConnection) -> None:
        """Give back one channel slot."""
        with self.lock:
            pooled.channels = max(0, pooled.channels - 1)

    def stats(self, key: ConnectionKey) -> list[int]:
        """Channels in use on each cached live connection for ``key`` (for tests and doctor)."""
        with self.lock:
            return [c.channels for c in self.connections.get(key, []) if c.usable]

    def close_all(self) -> None:
        """Close every cached connection."""
        with self.lock:
            conns = [c for cs in self.connections.values() for c in cs]
            self.connections.clear()
        for pooled in conns:
            with contextlib.suppress(Exception):
                LOOP.loop.call_soon_threadsafe(pooled.conn.close)


POOL = ConnectionPool()


class SSHProcessChannel(QueuedOutput, ClosesOnce):
    """:class:`~environments.shell.channel.Channel` over an asyncssh process (stdin and stdout).

    A reader task on the loop moves stdout chunks into a queue; ``b""`` marks EOF.
    Writes are handed to the loop without waiting: a failed write shows up as EOF.
    """

    def __init__(self, process: asyncssh.SSHClientProcess[bytes], on_close: Any = None) -> None:
        self._process = process
        super().__init__()
        self.on_close = on_close
        self._loop = LOOP.loop
        self._loop.call_soon_threadsafe(self._start_pump)

    def _start_pump(self) -> None:
        self._task = self._loop.create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while True:
                data = await self._process.stdout.read(_READ_SIZE)
                if not data:
                    break
                self.put(data)
        except Exception:  # a dropped connection ends the stream like EOF
            pass
        self.put(b"")

    def _write_now(self, data: bytes) -> None:
        try:
            self._process.stdin.write(data)
        except Exception:
            self.put(b"")

    def write(self, data: bytes) -> None:
        if self._closed or self.eof or self._process.channel.is_closing():
            raise BrokenPipeError("ssh channel is closed")
        self._loop.call_soon_threadsafe(self._write_now, data)

    @property
    def peer_gone(self) -> bool:
        """True when the remote shell's stream ended (or the connection dropped)."""
        if self.eof or self._closed:
            return True
        return bool(self._process.channel.is_closing())

    def close(self) -> None:
        if not self._close_once():
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._process.close)
