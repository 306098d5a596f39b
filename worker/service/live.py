"""A streamed call's live output: redacted pieces on the call's stream while it runs.

:class:`LiveOutput` takes the command's raw output from the shell reader
(:meth:`feed`, cheap: it only appends), and a thread of its own decodes it
(UTF-8, invalid bytes replaced, sequences split across reads joined), redacts
it with a :class:`~process_registry.redact.StreamRedactor` (a secret split
across reads is still caught: the redactor holds back what may continue) and
pushes it to the call's stream (``worker.protocol.streams``), coalescing what
arrived during the previous push. :meth:`close` pushes what is left before the
call's result is delivered, so the stream holds every piece before the result.
A ledger that fails stops the live output, never the call (its result still
carries the output).
"""

from __future__ import annotations

import codecs
import logging
import threading

from process_registry.redact import StreamRedactor
from worker.protocol.streams import LIVE_PIECE_BYTES, CallStreams

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 30.0
"""How long :meth:`LiveOutput.close` waits for the last pieces to be pushed."""


class LiveOutput:
    """The live output of call ``call_id``; ``redact``: as the call's result is."""

    def __init__(self, streams: CallStreams, call_id: str, *, redact: bool = True) -> None:
        self.streams = streams
        self.call_id = call_id
        self._redactor = StreamRedactor() if redact else None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = bytearray()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._failed = False
        self._thread = threading.Thread(target=self._run, name=f"sbx-live-{call_id[:8]}",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def feed(self, data: bytes) -> None:
        """Take a piece of the command's output (called by the shell's reader)."""
        with self._lock:
            self._pending += data
        self._wake.set()

    def close(self) -> None:
        """Push everything fed so far, then stop (waits at most :data:`CLOSE_WAIT_S`)."""
        self._closing = True
        self._wake.set()
        self._thread.join(CLOSE_WAIT_S)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            closing = self._closing  # read first: what was fed before close is in _pending
            with self._lock:
                raw, self._pending = bytes(self._pending), bytearray()
            text = self._decoder.decode(raw, final=closing)
            if self._redactor is not None:
                text = self._redactor.feed(text)
                if closing:
                    text += self._redactor.flush()
            self._push(text)
            if closing:
                return

    def _push(self, text: str) -> None:
        if self._failed or not text:
            return
        data = text.encode()
        try:
            start = 0
            while start < len(data):
                end = min(len(data), start + LIVE_PIECE_BYTES)
                while end < len(data) and data[end] & 0xC0 == 0x80:
                    end -= 1  # cut between characters: each piece decodes on its own
                self.streams.push_live(self.call_id, data[start:end].decode())
                start = end
        except Exception as exc:  # the live view is lost; the call and its result are not
            self._failed = True
            log.warning("live output of call %s stopped: %s: %s", self.call_id,
                        type(exc).__name__, exc)  # fmt: skip
