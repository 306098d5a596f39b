"""Sentinel framing for a long-lived shell driven over a byte stream.

The session shell writes everything -- the command's output and its own
control records -- to one byte stream. Control records are *markers*::

    TOKEN KIND PAYLOAD TOKEN "."

``TOKEN`` is a random per-shell string the command never sees whole, ``KIND``
one ASCII letter. :class:`MarkerScanner` splits the stream into output bytes
and markers incrementally with bounded memory, so a marker split across two
reads is still found and output of any size streams through.

The module also holds the shell-quoting helpers and the parser for the
``export -p`` dumps a shell uses to report its environment.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# Kinds of marker the session shell emits (see shell_script.py).
KIND_READY = "R"  # bootstrap finished
KIND_PGID = "P"  # process group of the command just started
KIND_ENV = "S"  # ``export -p`` dump at the end of a command
KIND_CWD = "C"  # working directory at the end of a command
KIND_NO_WORKDIR = "W"  # the call's workdir does not exist; nothing ran
KIND_EXIT = "X"  # the command's subshell is exiting; payload is its exit status
KIND_END = "E"  # the parent shell saw the command end; payload is the wait status
KINDS = frozenset(
    KIND_READY + KIND_PGID + KIND_ENV + KIND_CWD + KIND_NO_WORKDIR + KIND_EXIT + KIND_END
)

# A marker payload larger than this is not a marker the shell wrote.
MAX_PAYLOAD = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Output:
    """Bytes the command wrote."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Marker:
    """A control record written by the session shell."""

    kind: str
    payload: bytes


Event = Output | Marker


def marker_number(payload: bytes) -> int | None:
    """A marker's payload as a number (a pid, an exit status); None when it is not one."""
    try:
        return int(payload)
    except ValueError:
        return None


def _token_start(buf: bytes, start: int, token: bytes) -> int:
    """Where a tail of ``buf`` (from ``start`` on) that may begin ``token`` starts;
    ``len(buf)`` when no tail can (so output is never held back needlessly)."""
    i = buf.find(token[:1], start)
    while i >= 0:
        if token.startswith(buf[i:]):
            return i
        i = buf.find(token[:1], i + 1)
    return len(buf)


class MarkerScanner:
    """Incremental splitter of a shell stream into :class:`Output` and :class:`Marker`.

    Holds back only output that may be the start of a marker (a tail of at most
    ``len(token) - 1`` bytes that begins the token: live output is not delayed)
    plus the payload of one marker being read.
    """

    def __init__(self, token: bytes) -> None:
        if len(token) < 8:
            raise ValueError("token too short to be unguessable")
        self._token = token
        self._buf = b""
        self._in_marker = False

    def feed(self, chunk: bytes) -> list[Event]:
        """Consume ``chunk`` and return the events it completes, in stream order."""
        return list(self._feed(chunk))

    def _feed(self, chunk: bytes) -> Iterator[Event]:
        buf = self._buf + chunk if self._buf else chunk
        token = self._token
        tlen = len(token)
        pos = 0
        while True:
            if not self._in_marker:
                i = buf.find(token, pos)
                if i < 0:
                    keep = _token_start(buf, max(pos, len(buf) - (tlen - 1)), token)
                    if keep > pos:
                        yield Output(buf[pos:keep])
                    self._buf = buf[keep:]
                    return
                if i > pos:
                    yield Output(buf[pos:i])
                pos = i + tlen
                self._in_marker = True
            # Inside a marker: KIND PAYLOAD TOKEN "."
            if pos >= len(buf):
                self._buf = buf[pos:]
                return
            kind = chr(buf[pos])
            if kind not in KINDS:
                # Not ours after all: the token bytes were output.
                self._in_marker = False
                yield Output(token)
                continue
            j = buf.find(token, pos + 1)
            if j < 0 or j + tlen >= len(buf):
                if len(buf) - pos > MAX_PAYLOAD:
                    self._in_marker = False
                    yield Output(token)
                    continue
                self._buf = buf[pos:]
                return
            if buf[j + tlen : j + tlen + 1] != b".":
                self._in_marker = False
                yield Output(token)
                continue
            yield Marker(kind, buf[pos + 1 : j])
            pos = j + tlen + 1
            self._in_marker = False

    def flush(self) -> bytes:
        """Bytes held back when the stream ended (output of a truncated stream)."""
        rest = (self._token if self._in_marker else b"") + self._buf
        self._buf = b""
        self._in_marker = False
        return rest


def read_line(read: Callable[[float], bytes | None], timeout: float) -> tuple[bytes, bytes]:
    """``(first line without its newline, bytes read past it)`` from a channel's ``read``.

    Within ``timeout`` seconds; at EOF or timeout the line is what came so far.
    """
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        chunk = read(max(0.0, deadline - time.monotonic()))
        if not chunk:
            return buf, b""
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    return line, rest


def shell_quote(value: str) -> str:
    """Quote ``value`` as one POSIX shell word (single quotes; works in sh, dash, ash, bash)."""
    if "\x00" in value:
        raise ValueError("a shell word cannot contain a NUL byte")
    return "'" + value.replace("'", "'\\''") + "'"


_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_ANSI_C_SIMPLE = {
    ord("a"): 7, ord("b"): 8, ord("e"): 27, ord("E"): 27, ord("f"): 12, ord("n"): 10,
    ord("r"): 13, ord("t"): 9, ord("v"): 11, ord("\\"): 92, ord("'"): 39, ord('"'): 34,
    ord("?"): 63,
}  # fmt: skip


def _read_ansi_c(data: bytes, i: int, out: bytearray) -> int:
    """Decode a ``$'...'`` body starting at ``i`` (after the quote); return the index after it."""
    n = len(data)
    while i < n:
        c = data[i]
        if c == 39:  # closing '
            return i + 1
        if c != 92 or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = data[i + 1]
        if e in _ANSI_C_SIMPLE:
            out.append(_ANSI_C_SIMPLE[e])
            i += 2
        elif 48 <= e <= 55:  # octal, up to three digits
            j = i + 1
            while j < min(i + 4, n) and 48 <= data[j] <= 55:
                j += 1
            out.append(int(data[i + 1 : j], 8) & 0xFF)
            i = j
        elif e in (ord("x"), ord("u"), ord("U")):
            width = {ord("x"): 2, ord("u"): 4, ord("U"): 8}[e]
            j = i + 2
            while j < min(i + 2 + width, n) and chr(data[j]) in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                out += data[i : i + 2]
            else:
                code = int(data[i + 2 : j], 16)
                out += bytes([code]) if e == ord("x") else chr(code).encode("utf-8", "replace")
            i = j
        elif e == ord("c") and i + 2 < n:
            out.append(data[i + 2] & 0x1F)
            i += 3
        else:
            out += data[i : i + 2]
            i += 2
    return i


def _read_word(data: bytes, i: int) -> tuple[bytes, int]:
    """Read one shell word (quotes concatenated) starting at ``i``."""
    out = bytearray()
    n = len(data)
    while i < n:
        c = data[i]
        if c in (32, 9, 10):
            break
        if c == 39:  # '...'
            j = data.find(b"'", i + 1)
            j = n if j < 0 else j
            out += data[i + 1 : j]
            i = j + 1
        elif c == 36 and i + 1 < n and data[i + 1] == 39:  # $'...'
            i = _read_ansi_c(data, i + 2, out)
        elif c == 34:  # "..."
            i += 1
            while i < n and data[i] != 34:
                if data[i] == 92 and i + 1 < n and data[i + 1] in b'"\\$`\n':
                    if data[i + 1] != 10:
                        out.append(data[i + 1])
                    i += 2
                else:
                    out.append(data[i])
                    i += 1
            i += 1
        elif c == 92 and i + 1 < n:
            out.append(data[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out), i


def parse_export_dump(data: bytes) -> dict[str, str]:
    """Parse ``export -p`` output of bash, dash or busybox ash into ``{name: value}``.

    Exported names without a value (``declare -x NAME``) are left out: they are
    not in the environment a child process sees; so are values holding a NUL byte
    (``$'\\0'``), which no environment can.
    """
    env: dict[str, str] = {}
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i] in (32, 9, 10):
            i += 1
        if i >= n:
            break
        word, i = _read_word(data, i)
        if word not in (b"declare", b"export", b"typeset"):
            # Not a line we understand; skip to the end of it.
            nl = data.find(b"\n", i)
            i = n if nl < 0 else nl + 1
            continue
        while i < n and data[i] == 32:
            i += 1
        array = False
        while i < n and data[i] == 45:  # flags such as -x or -rx
            flags, i = _read_word(data, i)
            array = array or b"a" in flags or b"A" in flags
            while i < n and data[i] == 32:
                i += 1
        m = _NAME.match(data, i)
        if not m:
            continue
        name = m.group().decode()
        i = m.end()
        if i < n and data[i] == 61:  # '='
            value, i = _read_word(data, i + 1)
            # bash exports no array to a child; neither does the session. No environment
            # holds a NUL: a value with one is a dump the command forged (``export`` is
            # a name it can redefine), which would break every later call of the session.
            if not array and b"\0" not in value:
                env[name] = value.decode("utf-8", errors="surrogateescape")
    return env
