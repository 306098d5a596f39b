"""Bounded capture of command output.

A command may print gigabytes; the worker keeps at most ``limit`` bytes of it:
the first half and the last half, with a marker that says how much was cut.
Memory stays bounded while reading, whatever the command prints.
"""

from __future__ import annotations


def _trim_partial_utf8_start(data: bytes) -> bytes:
    """Drop UTF-8 continuation bytes at the start of a tail slice (at most three)."""
    i = 0
    while i < min(3, len(data)) and (data[i] & 0xC0) == 0x80:
        i += 1
    return data[i:]


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
            self._tail = bytearray(chunk[-self._tail_cap :])
            return
        self._tail += chunk
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        """True when some of the stream was dropped."""
        return self.total_bytes > len(self._head) + len(self._tail)

    @property
    def omitted_bytes(self) -> int:
        """How many bytes of the stream were dropped."""
        return self.total_bytes - len(self._head) - len(self._tail)

    def text(self) -> str:
        """The kept output, decoded, with a marker where bytes were dropped."""
        if not self.truncated:
            return bytes(self._head + self._tail).decode("utf-8", errors="replace")
        head = bytes(self._head).decode("utf-8", errors="replace")
        tail = _trim_partial_utf8_start(bytes(self._tail)).decode("utf-8", errors="replace")
        marker = f"\n... [sbx: {self.omitted_bytes} bytes of output omitted] ...\n"
        return head + marker + tail
