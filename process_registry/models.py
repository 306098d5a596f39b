"""Data the process registry persists and returns: checkpoints, receipts, status views, errors.

Times are UTC epoch seconds (float). Every string that can carry a secret
(``command``, ``output``) is redacted before it is put in a persisted model;
:func:`redact` is the one entry point for that.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from environments.base import SpawnedProcess
from environments.errors import Denied, Invalid, SbxError
from environments.errors import NotFound as GenericNotFound
from environments.procinfo import process_start_time

ReceiptStatus = Literal["exited", "killed", "timeout", "lost"]
ProcessState = Literal["running", "exited", "killed", "timeout", "lost"]


class ProcessTableError(SbxError):
    """Root of the process table's errors."""


class PermissionDenied(ProcessTableError, Denied):
    """The verified session may not act on / read this process or receipt (CLI exit 3)."""


class NotFound(ProcessTableError, GenericNotFound):
    """No such process or receipt (CLI exit 4)."""


class InvalidId(ProcessTableError, Invalid):
    """An id that could escape its directory or is otherwise malformed."""


class UnsafePath(ProcessTableError, OSError):
    """A symlink, special file or foreign-owned directory where a private file was expected."""


class AlreadyExists(ProcessTableError, FileExistsError):
    """An exclusive write lost: the file (e.g. a process's one receipt) exists already."""


class IntegrityError(ProcessTableError, ValueError):
    """A stored receipt does not match its own hash."""


class OutputUnreadable(ProcessTableError):
    """A process's output file is something the worker does not read (the sandbox
    replaced it by a symlink, a FIFO): a ``log`` read answers ``error``."""


class InvalidRead(ProcessTableError, Invalid):
    """A ``log`` read with a negative or out-of-range offset or limit."""


MAX_OFFSET = (1 << 53) - 1
"""Largest offset or limit a read takes (exact in any JSON number)."""


def redact(text: str) -> str:
    """Forced redaction of ``text`` through ``process_registry.redact.redact_text``.

    Imported lazily so this package loads before (or without) the redactor's
    heavy tables; there is deliberately no fallback: without a redactor we
    fail rather than persist a secret.
    """
    from .redact import redact_text

    return str(redact_text(text))


class WriterIdentity(BaseModel):
    """Which worker process wrote a checkpoint: pid + its kernel start time + host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int
    start_time: int | None
    host: str

    @classmethod
    def current(cls) -> WriterIdentity:
        """Identity of this process."""
        pid = os.getpid()
        return cls(pid=pid, start_time=process_start_time(pid), host=socket.gethostname())

    def is_gone(self) -> bool:
        """True when the writer surely no longer runs (same host; pid dead or recycled).

        A writer on another host cannot be checked from here, so it counts as alive.
        """
        if self.host != socket.gethostname():
            return False
        now = process_start_time(self.pid)
        return now is None or (self.start_time is not None and now != self.start_time)


class ProcessRecord(BaseModel):
    """Checkpoint of one running background process: enough to find it again, safely."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    process_id: str
    pid: int
    pgid: int
    pid_start_time: int | None
    """Kernel start time of ``pid`` (``/proc/<pid>/stat`` field 22) when it was spawned."""
    boot_id: str | None
    """Boot id of the machine the pid lives on (None when the backend cannot tell)."""
    writer: WriterIdentity
    owner_session_id: str
    backend: str
    sandbox_id: str
    command: str
    """Redacted."""
    cwd: str | None
    """The workdir the call asked for (None: the session's), redacted."""
    output_path: str
    status_path: str
    started_at: float
    pty: bool = False
    timeout: float | None = None
    output_cap: int | None = None
    """Bytes of output kept on disk (0: unlimited); None in checkpoints from before
    the cap existed: the adopting worker's setting applies."""

    def spawned(self) -> SpawnedProcess:
        """The backend handle this record describes."""
        return SpawnedProcess(
            pid=self.pid,
            pgid=self.pgid,
            start_time=self.pid_start_time,
            output_path=self.output_path,
            status_path=self.status_path,
        )


class Receipt(BaseModel):
    """Durable, redacted, bounded result of one finished process (docs/processes.md).

    ``seq`` numbers the receipts of one owner session from 1; ``prev_sha256``
    is the ``sha256`` of that session's previous receipt (None for the first);
    ``sha256`` covers the canonical JSON of every other field but ``mac``;
    ``mac`` is the worker's seal over ``sha256`` (``<kid>.<mac>``, a key only
    workers hold: docs/processes.md, "What verify proves").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    process_id: str
    owner_session_id: str
    command: str
    backend: str
    sandbox_id: str
    cwd: str | None
    pid: int | None = None
    started_at: float
    ended_at: float
    exit_code: int | None
    status: ReceiptStatus
    output: str
    output_truncated: bool
    output_bytes: int
    seq: int = 0
    prev_sha256: str | None = None
    sha256: str = ""
    mac: str = ""

    def canonical_bytes(self) -> bytes:
        """The hashed form: sorted-key compact JSON of all fields but ``sha256`` and ``mac``."""
        body: dict[str, Any] = self.model_dump(exclude={"sha256", "mac"})
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def compute_sha256(self) -> str:
        """SHA-256 (hex) of :meth:`canonical_bytes`."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()

    def sealed(self, seq: int, prev_sha256: str | None) -> Receipt:
        """This receipt placed in its session chain, with its own hash filled in."""
        placed = self.model_copy(
            update={"seq": seq, "prev_sha256": prev_sha256, "sha256": "", "mac": ""}
        )
        return placed.model_copy(update={"sha256": placed.compute_sha256()})

    def is_intact(self) -> bool:
        """True when ``sha256`` matches the content."""
        return self.sha256 == self.compute_sha256()


class ProcessInfo(BaseModel):
    """What ``poll``/``wait``/``kill``/``list`` return about one process."""

    model_config = ConfigDict(frozen=True)

    process_id: str
    pid: int | None
    status: ProcessState
    exit_code: int | None = None
    command: str
    owner_session_id: str
    backend: str
    started_at: float
    ended_at: float | None = None
    output_bytes: int | None = None
    output_tail: str = ""
    """Last few KiB of (redacted) output, for a quick look."""
    output_cap: int | None = None
    """Bytes of output kept on disk, the newest (None: unlimited, or only a receipt is left)."""
    output_cap_enforced: bool | None = None
    """False when the sandbox cannot discard the output's head (no hole punching there,
    e.g. busybox ``fallocate``): the output file grows past ``output_cap``. None: not
    known yet (or no cap)."""
    output_discarded: int = 0
    """Bytes at the start of the output discarded to honour the cap: ``log`` starts after."""


class LogChunk(BaseModel):
    """A slice of a process's output read by byte offset.

    ``offset`` is where ``text`` starts; ``next_offset`` is where the following
    read should start. It never points inside a UTF-8 sequence, so reading chunk
    after chunk decodes exactly.
    """

    model_config = ConfigDict(frozen=True)

    process_id: str
    text: str
    offset: int
    next_offset: int
    eof: bool
    """True when the process has ended and nothing follows ``next_offset``."""
    status: ProcessState
    discarded_before: int = 0
    """Bytes ``[0, discarded_before)`` of the output were discarded by the on-disk cap. A
    read asked below it starts there instead (``offset`` says where: a little past it
    when it cut into a line or a UTF-8 sequence)."""
