"""A :class:`~environments.shell.channel.Channel` over one ``Sandbox.exec`` process of Modal's SDK.

The session shell is a single long-lived exec; its stdin and stdout carry the
framing of :mod:`environments.shell.framing`. Both directions live on the SDK's
own event loop (:mod:`.stdio`): a pump task moves stdout chunks into a
:class:`~environments.shell.queued.QueuedOutput`, and a
:class:`~.stdio.StdinStream` sends queued input in order, coalescing what piled
up while the previous write was in flight. :meth:`write` never waits for the
network: input that cannot be delivered shows up as the end of the stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from environments.shell.queued import ClosesOnce, QueuedOutput

from . import sdk
from .stdio import StdinStream, read_stdout


class ModalExecChannel(QueuedOutput, ClosesOnce):
    """Channel over an exec's stdin/stdout; ``on_close`` runs once in :meth:`close`."""

    def __init__(self, process: sdk.Process, on_close: Callable[[], None] | None = None) -> None:
        self._router = sdk.exec_router(process)
        self.on_close = on_close
        super().__init__()
        self._broken = False
        self._loop = sdk.sdk_loop()
        self._stdin: StdinStream | None = None
        self._pump = sdk.submit(self._read_all())

    # -- on the SDK's loop ------------------------------------------------------------------

    async def _read_all(self) -> None:
        try:
            async with contextlib.aclosing(read_stdout(*self._router)) as chunks:
                async for chunk in chunks:
                    if chunk:
                        self.put(chunk)
        except Exception:  # a lost stream ends the channel like EOF
            pass
        finally:
            self.put(b"")

    def _input_broken(self) -> None:
        self._broken = True
        self.put(b"")

    def _enqueue(self, data: bytes, eof: bool) -> None:
        if self._stdin is None:
            self._stdin = StdinStream(*self._router, self._input_broken)
        self._stdin.put(data, eof=eof)

    # -- the Channel protocol (caller's thread) ------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._closed or self.eof or self._broken:
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
