"""Checkpoints of running background processes and the rule for adopting them.

One file per process, ``$SBX_HOME/checkpoints/<process_id>.json`` (0600 in a
0700 directory, written atomically). A checkpoint belongs to the worker that
wrote it (its :class:`~process_registry.models.WriterIdentity`): no other
worker rewrites or removes it while that writer runs. When the writer is gone,
a new worker may take it over, under an exclusive directory lock so that two
restarting workers never both adopt the same process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from environments.procinfo import boot_id, process_start_time

from .atomic import (
    atomic_write,
    ensure_private_dir,
    read_nofollow,
    remove,
    sweep_temp_files,
    validate_id,
)
from .models import PermissionDenied, ProcessRecord, UnsafePath, WriterIdentity, redact


@dataclass(frozen=True)
class Decision:
    """What a starting worker should do with one checkpoint.

    * ``adopt``: the recorded process still runs (pid, start time and boot id
      match) and its writer is gone: track it.
    * ``finalize``: the writer is gone and the recorded process is not running
      any more (or its pid now names another process): write its receipt from
      the status file, and never signal that pid.
    * ``skip``: the writer still runs (or cannot be checked): leave it alone.
    """

    action: Literal["adopt", "finalize", "skip"]
    reason: str


def adoptable(
    record: ProcessRecord,
    *,
    me: WriterIdentity | None = None,
    writer_gone: Callable[[WriterIdentity], bool] | None = None,
) -> Decision:
    """Apply the PID-safety rule (docs/processes.md) to a local-machine ``record``.

    Identity of the process is pid + kernel start time + boot id; any
    mismatch means the pid is not ours any more (recycled, or another boot)
    and it must not be signalled.
    """
    me = me or WriterIdentity.current()
    if record.writer == me:
        return Decision("skip", "written by this worker")
    gone = writer_gone(record.writer) if writer_gone is not None else record.writer.is_gone()
    if not gone:
        return Decision("skip", "its writer is still running")
    if record.boot_id is not None and record.boot_id != boot_id():
        return Decision("finalize", "recorded under another boot")
    now = process_start_time(record.pid)
    if now is None:
        return Decision("finalize", "process has ended")
    if record.pid_start_time is None or now != record.pid_start_time:
        return Decision("finalize", "pid now belongs to another process")
    if _is_zombie(record.pid):
        return Decision("finalize", "process has ended (zombie)")
    return Decision("adopt", "pid, start time and boot id match; writer is gone")


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return True
    rest = data[data.rfind(b")") + 2 :]
    return rest[:1] in (b"Z", b"X")


class CheckpointStore:
    """Checkpoint files under ``home/checkpoints`` written by one worker (``me``)."""

    def __init__(self, home: Path, *, me: WriterIdentity | None = None) -> None:
        self.dir = ensure_private_dir(Path(home) / "checkpoints")
        self.me = me or WriterIdentity.current()
        sweep_temp_files(self.dir)

    def path(self, process_id: str) -> Path:
        return self.dir / f"{validate_id(process_id, 'process id')}.json"

    def write(self, record: ProcessRecord) -> ProcessRecord:
        """Persist ``record`` as written by this worker; the command is redacted first.

        Raises :class:`PermissionDenied` when a checkpoint of that id exists
        and belongs to another writer.
        """
        current = self.load(record.process_id)
        if current is not None and current.writer != self.me:
            raise PermissionDenied(f"checkpoint {record.process_id} belongs to another worker")
        stored = record.model_copy(update={"writer": self.me, "command": redact(record.command)})
        # No directory fsync: a checkpoint only matters within this boot (a power cut
        # changes the boot id and voids every pid in it); the file itself is fsynced.
        atomic_write(
            self.dir,
            f"{record.process_id}.json",
            stored.model_dump_json().encode(),
            fsync_dir=False,
        )
        return stored

    def take_over(self, record: ProcessRecord) -> ProcessRecord:
        """Become the writer of ``record`` after its writer died (call under :meth:`locked`)."""
        current = self.load(record.process_id)
        if current is None:
            raise FileNotFoundError(record.process_id)
        if current.writer != self.me and not current.writer.is_gone():
            raise PermissionDenied(f"checkpoint {record.process_id} belongs to a live worker")
        stored = current.model_copy(update={"writer": self.me})
        atomic_write(self.dir, f"{record.process_id}.json", stored.model_dump_json().encode())
        return stored

    def remove(self, process_id: str) -> bool:
        """Delete this worker's checkpoint of ``process_id``; another writer's stays."""
        current = self.load(process_id)
        if current is None:
            return False
        if current.writer != self.me and not current.writer.is_gone():
            raise PermissionDenied(f"checkpoint {process_id} belongs to a live worker")
        return remove(self.path(process_id))

    def load(self, process_id: str) -> ProcessRecord | None:
        """The checkpoint of ``process_id``, or None (also for an unreadable/unsafe file)."""
        try:
            return ProcessRecord.model_validate_json(read_nofollow(self.path(process_id)))
        except FileNotFoundError:
            return None
        except (UnsafePath, ValidationError, ValueError):
            return None

    def load_all(self) -> list[ProcessRecord]:
        """Every well-formed checkpoint; malformed or symlinked entries are ignored."""
        records = []
        for name in sorted(os.listdir(self.dir)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            with contextlib.suppress(Exception):
                rec = self.load(name[: -len(".json")])
                if rec is not None:
                    records.append(rec)
        return records

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive lock over adoption, shared by every worker using this home."""
        fd = os.open(
            self.dir / ".adopt.lock",
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
