"""What the registry keeps per process in memory, and the views built from it.

Pure helpers (no registry state): the in-memory :class:`Tracked` entry, the
:class:`AdoptionReport`, reading a process's status and output files through
its environment, and turning a record or a receipt into the
:class:`~process_registry.models.ProcessInfo` / :class:`~process_registry.models.LogChunk`
callers get. Everything that can carry a secret is redacted here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from environments.base import Environment, discard_boundary
from environments.errors import SandboxDead, SandboxError

from .in_context import (
    CONTEXT_BYTES,
    decode_after,
    decode_before,
    redact_between,
    settled_length,
)
from .models import (
    LogChunk,
    OutputUnreadable,
    ProcessInfo,
    ProcessRecord,
    ProcessState,
    Receipt,
)
from .output_cap import CapState, lead_cut
from .receipt_excerpt import excerpt
from .receipts import ReceiptStore

TAIL_BYTES = 2048
"""How much of the output end a :class:`ProcessInfo` carries."""

CHAR_CONTEXT = 4
"""Bytes a ``log`` read takes on each side of its window at least: enough to finish a
character the window starts inside of, or to return a whole one past a tiny ``limit``."""


@dataclass
class Tracked:
    """One process this worker watches (live) or watched recently (finished)."""

    record: ProcessRecord
    env: Environment
    done: threading.Event = field(default_factory=threading.Event)
    """Set once the receipt is written (or writing it failed): wakes waiters."""
    checkpointed: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ending: ProcessState | None = None
    """``killed``/``timeout`` once we signalled it."""
    forced: bool = False
    """Its group outlived the TERM and we sent it KILL."""
    finalizing: bool = False
    receipt: Receipt | None = None
    cap: CapState = field(default_factory=lambda: CapState(0))
    """The on-disk cap of its output file (see :mod:`process_registry.output_cap`)."""


class TrackedProcesses:
    """What the halves of a process table share: the processes it tracks, running and
    recently finished, under one lock, and the receipts of those it no longer tracks."""

    _lock: threading.Lock
    _live: dict[str, Tracked]
    _finished: OrderedDict[str, Tracked]
    receipts: ReceiptStore


@dataclass
class AdoptionReport:
    """What :meth:`ProcessTable.adopt_all` did with each checkpoint."""

    adopted: list[str] = field(default_factory=list)
    finalized: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def utf8_cut(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 sequence."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:
            continue  # continuation byte: keep looking for the lead byte
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return n - back if need > back else n
    return n


def _sequence_length(lead: int) -> int:
    """Bytes of the UTF-8 sequence ``lead`` begins (1 for ASCII and for a stray byte)."""
    if lead & 0xE0 == 0xC0:
        return 2
    if lead & 0xF0 == 0xE0:
        return 3
    return 4 if lead & 0xF8 == 0xF0 else 1


def first_char(data: bytes) -> int:
    """Bytes of the character ``data`` starts with: its whole UTF-8 sequence, 1 for a
    byte that begins no valid sequence (it decodes as U+FFFD), 0 when ``data`` ends
    before the sequence does (or is empty)."""
    if not data:
        return 0
    need = _sequence_length(data[0])
    for i in range(1, need):
        if i >= len(data):
            return 0
        if data[i] & 0xC0 != 0x80:
            return 1
    return need


def inside_char(before: bytes, data: bytes) -> int:
    """Bytes at the start of ``data`` that finish a character begun in ``before`` (the
    bytes just ahead of it): 0 when ``data`` starts at a character (or a stray byte)."""
    stray = 0
    while stray < min(3, len(data)) and data[stray] & 0xC0 == 0x80:
        stray += 1
    if not stray:
        return 0
    tail = before[-3:]
    for back in range(1, len(tail) + 1):
        lead = tail[-back]
        if lead & 0xC0 == 0x80:
            continue
        return min(stray, max(0, _sequence_length(lead) - back))
    return 0


def unreadable(exc: OSError) -> str:
    """Why an output file could not be read, in words that name no host path."""
    # A sandbox error has no errno either: it must not read as a FIFO the sandbox planted.
    if isinstance(exc, SandboxDead):
        return "its sandbox is gone (stopped or removed)"
    if isinstance(exc, SandboxError):
        return "its sandbox cannot be reached"
    if exc.errno == errno.ELOOP:
        return "it was replaced by a symbolic link"
    if isinstance(exc, IsADirectoryError):
        return "it was replaced by a directory"
    if exc.errno == errno.EINVAL or exc.errno is None:
        return "it is not a regular file (a FIFO, socket or device)"
    return os.strerror(exc.errno)


def status_file_code(env: Environment, status_path: str) -> int | None:
    """The exit code the wrapper recorded, or None when the file is missing, torn or
    not a regular file (the sandbox can write it: never trust more than a number)."""
    try:
        raw = env.read_file(status_path, 0, 64)  # a code is a few bytes, whatever is there
    except OSError:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None  # a torn or foreign status file tells nothing: never invent a code


def output_size(rec: ProcessRecord, env: Environment, cap: int = 0) -> tuple[int, int]:
    """``(bytes written, bytes discarded by the cap)`` of the output file ((0, 0) when missing).

    Raises ``OSError`` when something else is there (the sandbox writes its
    processes' spool: a symlink, a FIFO): see :func:`draft_receipt`.
    """
    try:
        window = env.read_output(rec.output_path, 0, 0, cap)
    except FileNotFoundError:
        return 0, 0
    return window.size, window.discarded


def draft_receipt(
    rec: ProcessRecord,
    env: Environment,
    status: ProcessState,
    code: int | None,
    cap: int,
    *,
    output_cap: int = 0,
) -> Receipt:
    """An unsealed receipt of ``rec``: head and tail of its output, ``lost`` never has a code.

    ``cap`` bounds the excerpt; ``output_cap`` is the file's on-disk cap: its
    discarded head is never read (the excerpt says how much went) and
    ``output_bytes`` is still everything the process wrote. An output file the
    sandbox replaced by something unreadable (a symlink, a FIFO) never costs the
    receipt: its ``output`` says why there is none, ``output_bytes`` is 0.
    """

    def read_at(off: int, n: int) -> bytes:
        return env.read_output(rec.output_path, off, n, output_cap).data

    try:
        total, gone = output_size(rec, env, output_cap)
        output, cut = excerpt(read_at, total, cap, start=gone)
    except FileNotFoundError:
        total, output, cut = 0, "", False
    except OSError as exc:
        total, output, cut = 0, f"[output unreadable: {unreadable(exc)}]", False
    final: ProcessState = "lost" if status == "running" else status
    return Receipt(
        process_id=rec.process_id,
        owner_session_id=rec.owner_session_id,
        command=rec.command,
        backend=rec.backend,
        sandbox_id=rec.sandbox_id,
        cwd=rec.cwd,
        pid=rec.pid,
        started_at=rec.started_at,
        ended_at=time.time(),
        exit_code=None if final == "lost" else code,
        status=final,  # type: ignore[arg-type]  # "running" was mapped to "lost" above
        output=output,
        output_truncated=cut,
        output_bytes=total,
    )


def make_chunk(
    process_id: str,
    data: bytes,
    offset: int,
    limit: int,
    *,
    ended: bool,
    status: ProcessState,
    redact_live: bool,
    total: int | None = None,
    discarded_before: int = 0,
    moved: bool = False,
    before: bytes = b"",
    after: bytes = b"",
) -> LogChunk:
    """A :class:`LogChunk` of ``data`` read at ``offset`` (see ``ProcessTable.log``).

    ``total``: the stream's size when known; ``moved``: the read was moved up to
    the discard boundary, so ``data`` starts mid-stream (see :func:`lead_cut`).
    ``before``/``after``: the stream's bytes around ``data`` (up to
    :data:`~process_registry.in_context.CONTEXT_BYTES` each, at least
    :data:`CHAR_CONTEXT`), which redaction reads so that a window cut inside a
    secret never shows part of it.

    Characters are never split: a read whose ``offset`` falls inside a UTF-8
    sequence starts at the next character (``offset`` of the chunk says where),
    and one whose ``limit`` is smaller than the character there returns that
    character whole (up to 3 bytes past ``limit``), so every read that is not
    at the end of the output advances.
    """
    if moved:
        skip = lead_cut(data, line=redact_live)
        before, data, offset = data[:skip], data[skip:], offset + skip
    elif data and data[0] & 0xC0 == 0x80:  # a continuation byte: ``offset`` may be inside
        # The rest of a character begun before ``offset`` may run past a tiny window.
        stream, end = data + after, len(data)
        skip = inside_char(before, stream[:CHAR_CONTEXT])
        before, offset = before + stream[:skip], offset + skip
        data, after = stream[skip : max(skip, end)], stream[max(skip, end) :]
    more = offset + len(data) < total if total is not None else len(data) == limit
    keep = utf8_cut(data) if (more or not ended) else len(data)
    if keep == 0 and more:
        # ``limit`` is smaller than the character here: return it whole, or a client
        # following ``next_offset`` would ask for the same bytes forever.
        whole = data + after[:CHAR_CONTEXT]
        keep = first_char(whole)
        data, after = whole, after[len(whole) - len(data) :]
    if redact_live and not ended and not more:
        keep = settled_length(data[:keep], final=False)
    text = data[:keep].decode(errors="replace")
    if redact_live:
        text = redact_between(decode_before(before), text, decode_after(data[keep:] + after))
    nxt = offset + keep
    eof = ended and (nxt >= total if total is not None else not more)
    return LogChunk(
        process_id=process_id,
        text=text,
        offset=offset,
        next_offset=nxt,
        eof=eof,
        status=status,
        discarded_before=discarded_before,
    )


def live_chunk(t: Tracked, offset: int, limit: int, *, redact_live: bool) -> LogChunk | None:
    """A chunk of a tracked process's output file (None: the file is gone).

    Reads the window with its context on both sides in one read (one helper
    exec in a remote sandbox).
    """
    ended = t.done.is_set()
    context = CONTEXT_BYTES if redact_live else CHAR_CONTEXT
    low = max(0, offset - context)
    try:
        window = t.env.read_output(
            t.record.output_path, low, offset - low + limit + context, t.cap.read_cap()
        )
    except FileNotFoundError:
        return None
    except OSError as exc:  # the sandbox put something else there: say so, never raise
        raise OutputUnreadable(
            f"the output of {t.record.process_id} cannot be read: {unreadable(exc)}"
        ) from exc
    status = live_info(t, tail=False).status
    at = window.start
    if at > offset:  # the cap discarded the head past ``offset``: the read moves up
        data, before, after = window.data[:limit], b"", window.data[limit:]
    else:
        cut = offset - at
        before, data = window.data[:cut], window.data[cut : cut + limit]
        after = window.data[cut + limit :]
        at = offset
    return make_chunk(t.record.process_id, data, at, limit, ended=ended, status=status,
                      redact_live=redact_live, total=window.size,
                      discarded_before=window.discarded, moved=at > offset,
                      before=before, after=after)  # fmt: skip


def live_info(t: Tracked, *, tail: bool = True) -> ProcessInfo:
    """The view of a tracked process (its receipt's once it ended)."""
    cap = t.cap.read_cap()
    # Read the end once, done before receipt (the receipt is set first): a process ending
    # while this view is built must not look ended without its receipt ("lost").
    ended = t.done.is_set()
    receipt = t.receipt
    if ended and receipt is not None:
        facts = {
            "output_cap": t.cap.cap or None,
            "output_cap_enforced": t.cap.enforced,
            "output_discarded": discard_boundary(receipt.output_bytes, cap),
        }
        return info_from_receipt(receipt).model_copy(update=facts)
    rec = t.record
    size: int | None = None
    gone = 0
    text = ""
    with contextlib.suppress(Exception):
        size, gone = output_size(rec, t.env, cap)
        if tail and size:
            text = _tail_text(t, size, cap)
    return ProcessInfo(
        process_id=rec.process_id,
        pid=rec.pid,
        status="lost" if ended else "running",  # ended without a receipt: it failed
        command=rec.command,
        owner_session_id=rec.owner_session_id,
        backend=rec.backend,
        started_at=rec.started_at,
        output_bytes=size,
        output_tail=text,
        output_cap=t.cap.cap or None,
        output_cap_enforced=t.cap.enforced,
        output_discarded=gone,
    )


def _tail_text(t: Tracked, size: int, cap: int) -> str:
    """The last :data:`TAIL_BYTES` of a running process's output, redacted in context;
    an unfinished last line is held back (see :func:`settled_length`)."""
    low = max(0, size - TAIL_BYTES - CONTEXT_BYTES)
    window = t.env.read_output(t.record.output_path, low, size - low, cap)
    data = window.data
    split = max(0, len(data) - TAIL_BYTES)
    split += lead_cut(data[split:], line=False)
    keep = split + settled_length(data[split:], final=False)
    text = data[split:keep].decode(errors="replace")
    return redact_between(decode_before(data[:split]), text, decode_after(data[keep:]))


def info_from_receipt(r: Receipt) -> ProcessInfo:
    """The view of a finished process from its receipt."""
    return ProcessInfo(
        process_id=r.process_id,
        pid=r.pid,
        status=r.status,
        exit_code=r.exit_code,
        command=r.command,
        owner_session_id=r.owner_session_id,
        backend=r.backend,
        started_at=r.started_at,
        ended_at=r.ended_at,
        output_bytes=r.output_bytes,
        output_tail=r.output[-TAIL_BYTES:],
    )
