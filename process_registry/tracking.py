"""What the registry keeps per process in memory, and the views built from it.

Pure helpers (no registry state): the in-memory :class:`Tracked` entry, the
:class:`AdoptionReport`, reading a process's status and output files through
its environment, and turning a record or a receipt into the
:class:`~process_registry.models.ProcessInfo` / :class:`~process_registry.models.LogChunk`
callers get. Everything that can carry a secret is redacted here.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field

from environments.base import Environment

from .models import LogChunk, ProcessInfo, ProcessRecord, ProcessState, Receipt, redact
from .receipts import excerpt

TAIL_BYTES = 2048
"""How much of the output end a :class:`ProcessInfo` carries."""


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
    finalizing: bool = False
    receipt: Receipt | None = None


@dataclass
class AdoptionReport:
    """What :meth:`ProcessRegistry.adopt_all` did with each checkpoint."""

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


def status_file_code(env: Environment, status_path: str) -> int | None:
    """The exit code the wrapper recorded, or None when the file is missing or torn."""
    try:
        raw = env.read_file(status_path)
    except OSError:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None  # a torn or foreign status file tells nothing: never invent a code


def output_size(rec: ProcessRecord, env: Environment) -> int:
    """Bytes in the process's output file (0 when it does not exist)."""
    if rec.backend == "local":
        try:
            return os.stat(rec.output_path).st_size
        except FileNotFoundError:
            return 0
    return len(env.read_file(rec.output_path))


def draft_receipt(
    rec: ProcessRecord, env: Environment, status: ProcessState, code: int | None, cap: int
) -> Receipt:
    """An unsealed receipt of ``rec``: head and tail of its output, ``lost`` never has a code."""
    try:
        total = output_size(rec, env)
        output, cut = excerpt(lambda off, n: env.read_file(rec.output_path, off, n), total, cap)
    except FileNotFoundError:
        total, output, cut = 0, "", False
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
) -> LogChunk:
    """A :class:`LogChunk` of ``data`` read at ``offset`` (see ``ProcessRegistry.log``)."""
    full = len(data) == limit
    keep = utf8_cut(data) if (full or not ended) else len(data)
    if redact_live and not ended and not full:
        nl = data.rfind(b"\n", 0, keep)
        keep = nl + 1 if nl >= 0 else keep
    text = data[:keep].decode(errors="replace")
    if redact_live:
        text = redact(text)
    nxt = offset + keep
    eof = ended and (nxt >= total if total is not None else not full)
    return LogChunk(
        process_id=process_id, text=text, offset=offset, next_offset=nxt, eof=eof, status=status
    )


def live_info(t: Tracked, *, tail: bool = True) -> ProcessInfo:
    """The view of a tracked process (its receipt's once it ended)."""
    if t.done.is_set() and t.receipt is not None:
        return info_from_receipt(t.receipt)
    rec = t.record
    size: int | None = None
    text = ""
    with contextlib.suppress(Exception):
        size = output_size(rec, t.env)
        if tail and size:
            raw = t.env.read_file(rec.output_path, max(0, size - TAIL_BYTES), TAIL_BYTES)
            text = redact(raw.decode(errors="replace"))
    return ProcessInfo(
        process_id=rec.process_id,
        pid=rec.pid,
        status="lost" if t.done.is_set() else "running",
        command=rec.command,
        owner_session_id=rec.owner_session_id,
        backend=rec.backend,
        started_at=rec.started_at,
        output_bytes=size,
        output_tail=text,
    )


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
