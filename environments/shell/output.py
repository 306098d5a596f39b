"""Bounded capture of command output.

A command may print gigabytes; the worker keeps at most ``limit`` bytes of it:
the first half and the last half, with a marker that says how much was cut.
Memory stays bounded while reading, whatever the command prints.

Where the cut falls matters for redaction, which sees only what is kept: a
kept tail that began just after ``KEY=`` would show a bare secret the
redactor cannot recognise without its key. So the kept parts are bounded by
their context (:meth:`OutputCapture.text`): the head ends at a token
boundary, the tail starts at a line start, and a private key block cut open
by the omission is dropped; the marker counts every byte left out.
"""

from __future__ import annotations

import re

# Bytes that end an unquoted value (the redactor's value syntax): whitespace, quotes,
# separators and brackets.
_DELIMITERS = frozenset(b" \t\r\n\x0b\x0c\"'`,;&|<>(){}[]")
_KEY_END = re.compile(rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^\n]*\n?")
_KEY_BEGIN = b"-----BEGIN "


def _trim_partial_utf8_start(data: bytes) -> bytes:
    """Drop UTF-8 continuation bytes at the start of a tail slice (at most three)."""
    i = 0
    while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return data[i:]


def head_end(head: bytes) -> int:
    """Where a kept head should end: after its last delimiter (a partial last token, which
    could be the start of a secret, goes), or all of it when it has none."""
    for i in range(len(head) - 1, -1, -1):
        if head[i] in _DELIMITERS:
            return i + 1
    return len(head)


def tail_start(tail: bytes, line_start: bool) -> int:
    """Where a kept tail should start so that it holds no part of a line cut on its left.

    ``line_start``: the byte before the tail was a newline (nothing was cut).
    Otherwise the partial first line goes (unless it is blank); a tail inside one
    long line starts after its first delimiter. A private key block whose
    beginning was omitted goes up to its end line.
    """
    start = 0
    if not line_start:
        nl = tail.find(b"\n")
        if nl >= 0:
            start = 0 if not tail[:nl].strip() else nl + 1
        else:
            start = next((i + 1 for i, b in enumerate(tail) if b in _DELIMITERS), 0)
    end = _KEY_END.search(tail, start)
    if end is not None and tail.find(_KEY_BEGIN, start, end.start()) < 0:
        start = end.end()
    return start


class OutputCapture:
    """Keeps the head and tail of a byte stream within ``limit`` bytes.

    ``feed`` accepts chunks of any size; ``text`` renders what was kept as a
    ``str`` (invalid UTF-8 becomes U+FFFD) with an omission marker in the middle
    when anything was cut.
    """

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError("output limit must be at least 2 bytes")
        self.limit = limit
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._before_tail: int | None = None
        """The last byte dropped before the tail (None: nothing dropped yet)."""
        self.total_bytes = 0

    def feed(self, chunk: bytes) -> None:
        """Append ``chunk`` to the captured stream."""
        if not chunk:
            return
        self.total_bytes += len(chunk)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
            if not chunk:
                return
        if len(chunk) >= self._tail_cap:
            if len(chunk) > self._tail_cap:
                self._before_tail = chunk[-self._tail_cap - 1]
            elif self._tail:
                self._before_tail = self._tail[-1]
            self._tail = bytearray(chunk[-self._tail_cap :])
            return
        self._tail += chunk
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            self._before_tail = self._tail[excess - 1]
            del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        """True when some of the stream was dropped."""
        return self.total_bytes > len(self._head) + len(self._tail)

    @property
    def omitted_bytes(self) -> int:
        """How many bytes of the stream are not in :meth:`text` (once it was cut)."""
        if not self.truncated:
            return 0
        head, tail = self._kept()
        return self.total_bytes - len(head) - len(tail)

    def _kept(self) -> tuple[bytes, bytes]:
        head = bytes(self._head)
        head = head[: head_end(head)]
        tail = bytes(self._tail)
        tail = tail[tail_start(tail, self._before_tail == 0x0A) :]
        return head, _trim_partial_utf8_start(tail)

    def text(self) -> str:
        """The kept output, decoded, with a marker where bytes were dropped."""
        if not self.truncated:
            return bytes(self._head + self._tail).decode("utf-8", errors="replace")
        head, tail = self._kept()
        omitted = self.total_bytes - len(head) - len(tail)
        marker = f"\n... [sbx: {omitted} bytes of output omitted] ...\n"
        return head.decode("utf-8", errors="replace") + marker + tail.decode(
            "utf-8", errors="replace"
        )
