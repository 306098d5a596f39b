"""A :class:`~environments.shell.channel.Channel` over one ``Sandbox.exec`` process of Modal's SDK.

The session shell is a single long-lived exec; its stdin and stdout carry the
framing of :mod:`environments.shell.framing`. Both directions live on the SDK's
own event loop: a pump task moves stdout chunks into a
:class:`~environments.shell.queued.QueuedOutput`, and a writer task sends queued
input in order, coalescing what piled up while the previous write was in
flight. :meth:`write` never waits for the network: a failed write shows up as
the end of the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from environments.shell.queued import ClosesOnce, QueuedOutput

from . import sdk


class ModalExecChannel(QueuedOutput, ClosesOnce):
    """Channel over an exec's stdin/stdout; ``on_close`` runs once in :meth:`close`."""

    def __init__(self, process: sdk.Process, on_close: Callable[[], None] | None = None) -> None:
        self._stream = sdk.Stream.of(process)
        self.on_close = on_close
        super().__init__()
        self._broken = False
        self._loop = sdk.sdk_loop()
        self._outbox: list[bytes] = []
        self._stdin_eof = False
        self._wake = asyncio.Event()
        self._pump = sdk.submit(self._read_all())
        self._writer = sdk.submit(self._write_all())

    # -- on the SDK's loop ------------------------------------------------------------------

    async def _read_all(self) -> None:
        try:
            async for chunk in self._stream.stdout():
                if chunk:
                    self.put(chunk)
        except Exception:  # a lost stream ends the channel like EOF
            pass
        finally:
            self.put(b"")

    async def _write_all(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            data, eof = b"".join(self._outbox), self._stdin_eof
            self._outbox.clear()
            try:
                await self._stream.write(data, eof=eof)
            except Exception:
                self._broken = True
                self.put(b"")
                return
            if eof:
                return

    def _enqueue(self, data: bytes, eof: bool) -> None:
        self._outbox.append(data)
        self._stdin_eof = self._stdin_eof or eof
        self._wake.set()

    # -- the Channel protocol (caller's thread) ------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._closed or self.eof or self._broken or self._writer.done():
            raise BrokenPipeError("the Modal exec stream is closed")
        self._loop.call_soon_threadsafe(self._enqueue, data, False)

    @property
    def peer_gone(self) -> bool:
        """True when the exec's output ended or its input can no longer be written."""
        return self.eof or self._closed or self._broken or self._pump.done()

    def close(self) -> None:
        """Run ``on_close``, send EOF to the process's stdin (an idle shell exits), stop reading."""
        if not self._close_once():
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._enqueue, b"", True)
        self._pump.cancel()
