"""Typed results of the process helpers (``worker.client.processes``) and the receipt-op message."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from worker.protocol.mac import CallProof

ProcessStatusValue = Literal["running", "exited", "killed", "timeout", "lost"]
ReceiptOp = Literal[
    "receipts_list", "receipt_show", "receipts_verify", "receipts_prune", "continue"
]


class ReceiptOpMessage(BaseModel):
    """One receipt or continuation operation queued for a worker (``sbx.receipt_op``).

    ``proof`` is the session's (``worker.protocol.mac``); ``continue`` also needs
    ``child_proof``, the child session's consent over the same message.
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str
    call_id: str = Field(default="", max_length=128)
    op: ReceiptOp
    process_id: str | None = None
    child_id: str | None = None
    proof: CallProof | None = None
    child_proof: CallProof | None = None


class ProcessStarted(BaseModel):
    """``terminal`` with ``background: true`` succeeded."""

    model_config = ConfigDict(extra="allow")

    process_id: str
    pid: int
    status: Literal["running"] = "running"


class ProcessStatus(BaseModel):
    """``poll``/``wait``/``kill``/``list`` view of one process."""

    model_config = ConfigDict(extra="allow")

    process_id: str
    pid: int | None = None
    status: ProcessStatusValue
    exit_code: int | None = None
    command: str = ""
    owner_session_id: str = ""
    backend: str = ""
    started_at: float = 0.0
    ended_at: float | None = None
    output_bytes: int | None = None
    output_tail: str = ""


class ProcessLog(BaseModel):
    """A slice of output read by byte offset; continue from ``next_offset`` until ``eof``."""

    model_config = ConfigDict(extra="allow")

    process_id: str
    text: str
    offset: int
    next_offset: int
    eof: bool
    status: ProcessStatusValue


class ProcessWrite(BaseModel):
    """Input sent to a ``pty`` process."""

    model_config = ConfigDict(extra="allow")

    process_id: str
    bytes_written: int
    status: str = "running"


class Receipt(BaseModel):
    """A finished process's durable record (docs/processes.md, "Receipts")."""

    model_config = ConfigDict(extra="allow")

    process_id: str
    owner_session_id: str
    command: str
    backend: str
    sandbox_id: str
    cwd: str | None = None
    pid: int | None = None
    started_at: float
    ended_at: float
    exit_code: int | None
    status: Literal["exited", "killed", "timeout", "lost"]
    output: str
    output_truncated: bool
    output_bytes: int
    seq: int = 0
    prev_sha256: str | None = None
    sha256: str = ""


class Continuation(BaseModel):
    """A recorded compression continuation: ``child`` may read ``parent``'s receipts."""

    parent: str
    child: str


class VerifyReport(BaseModel):
    """``sbx receipts verify``: problems found (empty: intact) in the sessions checked."""

    problems: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list)
