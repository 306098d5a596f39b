"""Redaction of a window of output as it reads in its context.

A secret is recognised by what surrounds it (``KEY=`` before a value, a
vendor prefix, a private key block's first line), so redacting a slice on
its own can return part of a secret bare: a read that starts just after
``KEY=`` or ends inside a token. :func:`redact_between` redacts the slice
*with* the text around it and returns the part of that redaction which
belongs to the slice. Every character it returns comes from a redaction of
the whole context, so whatever the window, nothing the redactor would have
caught in the full stream comes back (given :data:`CONTEXT_BYTES` of context
each side: more than any secret the redactor recognises spans).
"""

from __future__ import annotations

from collections.abc import Callable

from .models import redact

CONTEXT_BYTES = 16 * 1024
"""Context read on each side of a window (the redactor reads at most ~10 KB around a secret)."""

PARTIAL_HOLD = 4096
"""A running process's unfinished last line shorter than this is held back from reads:
a secret it is still writing would be unrecognisable in part."""


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str, floor: int) -> int:
    n = min(len(a) - floor, len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def redact_between(before: str, text: str, after: str) -> str:
    """The redaction of ``text`` as it reads between ``before`` and ``after``.

    Computed as the part of ``redact(before + text + after)`` that is not the
    redaction of ``before`` (a prefix) nor of ``after`` (a suffix). When a
    secret straddles an edge, its replacement lands on the ``text`` side.
    """
    if not before and not after:
        return redact(text)
    whole = redact(before + text + after)
    head = redact(before) if before else ""
    start = len(head) if whole.startswith(head) else _common_prefix(whole, head)
    tail = redact(after) if after else ""
    if whole.endswith(tail) and len(whole) - len(tail) >= start:
        end = len(whole) - len(tail)
    else:
        end = len(whole) - _common_suffix(whole, tail, start)
    return whole[start:end]


def decode_before(data: bytes) -> str:
    """Context bytes read before a window: their first, possibly cut, UTF-8 sequence goes."""
    i = 0
    while i < min(3, len(data)) and data[i] & 0xC0 == 0x80:
        i += 1
    return data[i:].decode(errors="replace")


def decode_after(data: bytes) -> str:
    """Context bytes read after a window: their last, possibly cut, UTF-8 sequence goes."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        if need > back:
            data = data[: n - back]
        break
    return data.decode(errors="replace")


def settled_length(data: bytes, *, final: bool) -> int:
    """How much of ``data`` (the newest output of a process) may be shown now.

    All of it when ``final`` (the process ended); else up to its last line end,
    holding back an unfinished last line shorter than :data:`PARTIAL_HOLD`.
    """
    if final:
        return len(data)
    nl = data.rfind(b"\n")
    if nl >= 0:
        return nl + 1
    return len(data) if len(data) >= PARTIAL_HOLD else 0


def redacted_span(
    read_at: Callable[[int, int], bytes], start: int, end: int, *, floor: int, total: int
) -> str:
    """Bytes ``[start, end)`` of a stream, decoded and redacted in their context: up to
    :data:`CONTEXT_BYTES` each side, never below ``floor`` nor past ``total`` (one read)."""
    lo = max(floor, start - CONTEXT_BYTES)
    hi = max(end, min(total, end + CONTEXT_BYTES))
    data = read_at(lo, hi - lo)
    text = data[start - lo : end - lo].decode(errors="replace")
    return redact_between(decode_before(data[: start - lo]), text, decode_after(data[end - lo :]))
