"""Background processes a fleet shares: those in sandboxes any worker can reach.

A process on the worker's own host (the local backend) is checkpointed under
that host's ``SBX_HOME`` and adopted by the next worker there. A process in a
container, on an ssh host, in an apptainer instance or a cloud sandbox lives
on when its worker dies and any worker can re-attach to its sandbox, so its
checkpoint is also shared in the ledger (``sbx:checkpoints``). When its writer
is no longer present, one other worker takes it over (atomically, by compare
and set of the writer), re-attaches the sandbox and adopts the process under
the PID-safety rules: pid + start time + boot id of the sandbox's kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis

from environments.base import Environment
from environments.registry import backend_class
from process_registry.models import ProcessRecord, WriterIdentity
from process_registry.table import ProcessTable
from worker.protocol.leases import LeaseBook
from worker.protocol.ledger import receipt_route_key

log = logging.getLogger(__name__)

SHARED_CHECKPOINTS = "sbx:checkpoints"

# Take a shared checkpoint over from its (absent) writer: compare and set.
_TAKE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local rec = cjson.decode(raw)
local w = rec['writer']
if (w['host'] .. ':' .. tostring(w['pid'])) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


def writer_id(writer: WriterIdentity) -> str:
    """The worker id (``host:pid``) of a checkpoint's writer."""
    return f"{writer.host}:{writer.pid}"


def shares_processes(backend: str) -> bool:
    """True when other workers can reach this backend's background processes."""
    try:
        return not backend_class(backend).processes_on_worker_host
    except Exception:
        return False


class SharedCheckpoints:
    """The ledger's copy of checkpoints of processes that any worker can reach."""

    def __init__(self, client: redis.Redis, book: LeaseBook, me: WriterIdentity) -> None:
        self.client = client
        self.book = book
        self.me = me
        self._take = client.register_script(_TAKE)

    def put(self, record: ProcessRecord) -> None:
        """Share ``record`` (already redacted) while its process runs."""
        if shares_processes(record.backend):
            self.client.hset(SHARED_CHECKPOINTS, record.process_id, record.model_dump_json())

    def remove(self, process_id: str) -> None:
        """The process has its receipt: nothing left to adopt."""
        self.client.hdel(SHARED_CHECKPOINTS, process_id)

    def writer_gone(self, writer: WriterIdentity) -> bool:
        """True when ``writer`` surely no longer works: on this host its pid says so; from
        elsewhere, it stopped announcing its presence."""
        if writer == self.me:
            return False
        if writer.host == self.me.host:
            return writer.is_gone()
        return not self.book.present(writer_id(writer))

    def orphans(self) -> list[ProcessRecord]:
        """Shared checkpoints whose writer is gone."""
        raw: dict[Any, Any] = self.client.hgetall(SHARED_CHECKPOINTS)  # type: ignore[assignment]
        found = []
        for value in raw.values():
            try:
                rec = ProcessRecord.model_validate_json(value)
            except ValueError:
                continue
            if self.writer_gone(rec.writer):
                found.append(rec)
        return found

    def claim(self, record: ProcessRecord) -> bool:
        """Before a home adopts its own checkpoint ``record`` of a dead writer: True when
        this worker may (it took the shared copy over from that writer, or the process
        was never shared and has no receipt elsewhere); False when another worker took
        it over or wrote its receipt. Raises ``redis.RedisError``."""
        if not shares_processes(record.backend) or self.take(record) is not None:
            return True
        if self.client.hexists(SHARED_CHECKPOINTS, record.process_id):
            return False  # its writer is someone else now
        return not self.client.exists(receipt_route_key(record.process_id))

    def take(self, record: ProcessRecord) -> ProcessRecord | None:
        """Become the writer of ``record``; None when another worker took it first."""
        mine = record.model_copy(update={"writer": self.me})
        taken = self._take(
            keys=[SHARED_CHECKPOINTS],
            args=[record.process_id, writer_id(record.writer), mine.model_dump_json()],
        )
        return mine if int(taken) == 1 else None


def adopt_orphans(
    shared: SharedCheckpoints,
    table: ProcessTable,
    environment_for: Callable[[ProcessRecord], Environment | None],
    only: str | None = None,
) -> list[str]:
    """Adopt (or finalize) the processes of absent workers; the ids this worker took.

    ``only`` limits it to one process id (an action reached this worker for it).
    """
    taken: list[str] = []
    for rec in shared.orphans():
        if only is not None and rec.process_id != only:
            continue
        if table.tracks(rec.process_id):
            continue
        env = environment_for(rec)
        if env is None:
            continue
        mine = shared.take(rec)
        if mine is None:
            continue
        try:
            report = table.adopt_one(mine, env)
        except Exception:
            log.exception("adopting process %s failed", rec.process_id)
            continue
        if report.finalized and table.receipts.exists(rec.process_id):
            shared.remove(rec.process_id)
        taken.append(rec.process_id)
        log.info("took over process %s of absent worker %s", rec.process_id, rec.writer.host)
    return taken
