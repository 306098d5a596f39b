"""Incremental redaction of output that arrives in chunks (live output, tails, logs)."""

from __future__ import annotations

from typing import Final

from .base import MAX_READ_AHEAD, MAX_READ_BEHIND
from .engine import scan
from .private_keys import PEM
from .rules import RULES

#: Past this many characters without a line break, output is cut by length.
HOLD: Final = 16_384
_CONTEXT: Final = 1200  # emitted characters kept for look-behinds
_PEM_RECHECK: Final = 512  # wait for this much more data before re-checking a key block
assert HOLD > MAX_READ_AHEAD + 256 and _CONTEXT > MAX_READ_BEHIND
#: Rules whose token may continue on the next line (a split token).
_JOINABLE: Final = tuple((r.detector, r.unsettled) for r in RULES if r.unsettled is not None)


def _pem_settled(buf: str, p: int) -> bool:
    """Whether the private-key block starting at ``p`` reads no further than ``buf``."""
    m = PEM.match(buf, p)
    if m is None:  # header incomplete, or complete and not a private key
        return p + 96 <= len(buf) or "\n" in buf[p : p + 96]
    return m.group("end") is not None or m.end() + 128 <= len(buf)


def _line_end_hold(buf: str, start: int, brk: int) -> int:
    """Where to cut instead of after the line break at ``brk``: before a token at the end
    of that line that is still incomplete, since the next line may complete it.

    Only a token of that last line can: one from an earlier line has already
    joined its one line break when its read reaches ``brk``.
    """
    line = max(buf.rfind("\n", 0, brk), buf.rfind("\r", 0, brk - 1)) + 1
    lo = max(start, line, brk - MAX_READ_AHEAD)
    cut = brk + 1
    for detector, unsettled in _JOINABLE:
        for m in detector.finditer(buf, lo, brk + 1):
            if unsettled(buf, m.start(), brk):
                cut = min(cut, m.start())
                break
    return cut


def _safe_cut(buf: str, start: int) -> tuple[int, bool]:
    """Largest position before which every decision is final, and whether an
    open private key block is what limits it."""
    size = len(buf)
    brk = max(buf.rfind("\n", start), buf.rfind("\r", start))
    # Anchors more than HOLD before the end read only text that is here;
    # anchors before a line break read only their own line...
    cut = max(brk + 1 if brk >= 0 else start, size - HOLD, start)
    # ...or the next one, for a token split before it is complete...
    if brk >= 0 and cut == brk + 1:
        cut = _line_end_hold(buf, start, brk)
    # ...except a private key block, the one secret that spans many lines.
    q = buf.find("-----BEGIN", max(start, size - HOLD))
    while 0 <= q < cut:
        if not _pem_settled(buf, q):
            return q, True
        q = buf.find("-----BEGIN", q + 1)
    return cut, False


class StreamRedactor:
    """Incremental :func:`~.engine.redact_text` for output that arrives in chunks.

    ``feed(chunk)`` returns the redacted text that is now final; ``flush()``
    returns the rest and resets the redactor for a new stream.  Joining every
    returned piece equals ``redact_text`` of the joined input (for secrets no
    longer than :data:`~.base.MAX_SECRET`).

    What is held back: the partial last line (no secret but a private key block
    or a split token spans a line break, so complete lines are final), a token
    still incomplete at the end of the last line, an open private key block,
    and -- for a line longer than :data:`HOLD` -- only its last ``HOLD``
    characters.  So memory stays under about ``2 * HOLD`` plus one chunk, and a
    prompt without a newline (``Password: ``) appears only with the next line
    or at ``flush()``.  One instance belongs to one stream (one reader at a
    time).
    """

    def __init__(self) -> None:
        self._context = ""  # already emitted, kept for look-behinds
        self._held = ""  # not yet emitted
        self._wait = 0  # skip draining until _held is at least this long

    @property
    def pending(self) -> int:
        """Number of characters held back, not yet returned."""
        return len(self._held)

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the redacted text that can no longer change."""
        self._held += chunk
        size = len(self._held)
        if size < self._wait or (size < 2 * HOLD and "\n" not in chunk and "\r" not in chunk):
            return ""  # nothing new can have become final; keep cost O(chunk)
        return self._drain(final=False)

    def flush(self) -> str:
        """Return everything still held, redacted, and start a new stream."""
        out = self._drain(final=True)
        self._context, self._held, self._wait = "", "", 0
        return out

    def _drain(self, final: bool) -> str:
        buf = self._context + self._held
        start = len(self._context)
        cut, pem_open = (len(buf), False) if final else _safe_cut(buf, start)
        pieces: list[str] = []
        if cut > start:
            pieces, end = scan(buf, start, cut)
            self._context = buf[max(0, end - _CONTEXT) : end]
            self._held = buf[end:]
        # An open key block decides nothing new until more of it has arrived.
        self._wait = len(self._held) + _PEM_RECHECK if pem_open else 0
        return "".join(pieces)
