"""What of a process's output a receipt keeps: a bounded, redacted head and tail.

:func:`excerpt` reads the output through ``read_at`` and cuts it at line ends;
:func:`bound_text` bounds a text already in memory. Both mark what they left out.
"""

from __future__ import annotations

from collections.abc import Callable

from .in_context import redacted_span
from .output_cap import lead_cut

__all__ = ["bound_text", "excerpt"]


def bound_text(text: str, cap: int) -> tuple[str, bool]:
    """``text`` cut to about ``cap`` UTF-8 bytes as head + marker + tail; (text, truncated)."""
    data = text.encode()
    if len(data) <= cap:
        return text, False
    half = cap // 2
    head = data[:half].decode(errors="ignore")
    tail = data[-half:].decode(errors="ignore")
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}\n... [{omitted} bytes omitted] ...\n{tail}", True


def excerpt(
    read_at: Callable[[int, int], bytes], total: int, cap: int, *, start: int = 0
) -> tuple[str, bool]:
    """Head and tail of bytes ``[start, total)`` of a stream, cut at line ends, for a receipt.

    Cutting at newlines (when there is one near the cut) keeps a secret on one
    line whole on one side; each part is also redacted in its context (the
    bytes around it, :func:`~process_registry.in_context.redacted_span`), so
    a cut inside a long line shows no part of a secret either. ``start`` > 0
    (the process output cap discarded the head) begins the text with a marker
    saying how many bytes went, and the head at the next line start.
    """
    lead = ""
    first = start
    if start > 0:
        head = read_at(start, min(cap // 2, total - start))
        first = start + lead_cut(head, line=True)
        lead = f"[... {first} earlier bytes discarded (process output cap) ...]\n"
    if total - first <= cap - len(lead):
        return lead + redacted_span(read_at, first, total, floor=start, total=total), start > 0
    half = (cap - len(lead) - 64) // 2  # room for both markers: the store bounds it again
    head = read_at(first, half)
    nl = head.rfind(b"\n")
    head_end = first + (nl + 1 if nl >= half // 2 else len(head))
    tail = read_at(total - half, half)
    nl = tail.find(b"\n")
    tail_start = total - half + (nl + 1 if 0 <= nl < half // 2 else 0)
    omitted = tail_start - head_end
    text = lead + redacted_span(read_at, first, head_end, floor=start, total=total)
    text += f"\n... [{omitted} bytes omitted] ...\n"
    return text + redacted_span(read_at, tail_start, total, floor=start, total=total), True
