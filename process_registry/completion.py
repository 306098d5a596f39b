"""How a tracked process ends: its receipt, its waiters, its checkpoint, and the signals.

The completion half of :class:`~process_registry.table.ProcessTable` (which
sets the state declared here). When a process ends, its receipt is written
first, then its waiters are released, then its checkpoint is removed: exactly
once per process, also when a kill races the exit. A process is signalled only
while it still is that process, and never once its end is being recorded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable

from environments.base import Environment, SpawnedProcess
from environments.errors import SandboxError

from .checkpoints import CheckpointStore
from .models import AlreadyExists, ProcessState, Receipt
from .output_cap import OutputCapSweeper
from .tracking import Tracked, TrackedProcesses, draft_receipt, status_file_code
from .watcher import ExitWatcher

log = logging.getLogger(__name__)

FINISHED_KEPT = 256
"""Finished processes kept in memory (their output files too) for polls and logs."""


class ProcessCompletion(TrackedProcesses):
    """Ending tracked processes (see the module docstring)."""

    _watcher: ExitWatcher
    _sweeper: OutputCapSweeper
    checkpoints: CheckpointStore
    kill_grace: float
    on_finished: Callable[[str, str], None] | None
    expire_retry_s: float = 10.0
    """How soon a timeout whose signal did not reach the process's sandbox is tried again."""

    # -- completion ------------------------------------------------------------------------

    def _on_exit(self, process_id: str, wait_status: int | None) -> None:
        with self._lock:
            tracked = self._live.get(process_id)
        if tracked is not None:
            self._finalize(tracked, wait_status)

    def _finalize(self, t: Tracked, wait_status: int | None) -> None:
        """Receipt, then ``on_finished``, then release waiters, then drop the checkpoint
        (once per process): whoever waited for the end sees the fleet's view updated too."""
        with t.lock:
            if t.finalizing:
                return
            t.finalizing = True
            forced = t.forced
        rec = t.record
        self._sweeper.final(t)  # the file stays (spool, sandbox) after the receipt: bound it
        try:
            code = status_file_code(t.env, rec.status_path)
            if code is None and forced:
                # Our KILL took the wrapper too, before it could record anything:
                # what a shell says of a command ended that way, whichever is its parent.
                code = 128 + signal.SIGKILL
            if code is None:
                code = wait_status
            status: ProcessState = t.ending or ("exited" if code is not None else "lost")
            t.receipt = self._write_receipt(t, status, code)
        except Exception:
            log.exception("could not write the receipt of %s; its checkpoint stays", rec.process_id)
            t.done.set()
            return
        with self._lock:
            self._live.pop(rec.process_id, None)
            self._finished[rec.process_id] = t
            while len(self._finished) > FINISHED_KEPT:
                _, old = self._finished.popitem(last=False)
                self._discard_output(old)
        if self.on_finished is not None:
            try:
                self.on_finished(rec.process_id, rec.owner_session_id)
            except Exception:
                log.exception("on_finished failed for %s", rec.process_id)
        t.done.set()
        t.checkpointed.wait(30.0)
        with contextlib.suppress(Exception):
            self.checkpoints.remove(rec.process_id)
        with contextlib.suppress(Exception):
            if t.env.processes_on_worker_host:
                os.unlink(rec.status_path)

    def _write_receipt(self, t: Tracked, status: ProcessState, code: int | None) -> Receipt:
        rec = t.record
        draft = draft_receipt(
            rec, t.env, status, code, self.receipts.output_cap, output_cap=t.cap.read_cap()
        )
        try:
            return self.receipts.write(draft)
        except AlreadyExists:
            # Someone (another worker adopting it) wrote it first: theirs is the one receipt.
            return self.receipts.read(rec.process_id, rec.owner_session_id, verified=False)

    def _discard_output(self, t: Tracked) -> None:
        if t.env.processes_on_worker_host:
            with contextlib.suppress(OSError):
                os.unlink(t.record.output_path)

    def _signal_end(self, t: Tracked, reason: ProcessState) -> bool:
        """TERM the process group if it still is that process; mark why it ends."""
        spawned = t.record.spawned()
        if t.done.is_set() or not t.env.is_running(spawned):
            return False
        with t.lock:
            if t.finalizing:
                return False
            before, t.ending = t.ending, t.ending or reason
        try:
            t.env.signal(spawned, signal.SIGTERM)
        except BaseException:
            with t.lock:  # not signalled: an end that comes later is not this one
                if not t.finalizing:
                    t.ending = before
            raise
        return True

    def _expire(self, process_id: str) -> None:
        with self._lock:
            t = self._live.get(process_id)
        if t is None:
            return
        try:
            ended = self._signal_end(t, "timeout")
        except SandboxError as exc:
            # A host that is away for a while must not let the process outlive its timeout.
            log.warning("process %s is past its timeout but its sandbox did not answer (%s); "
                        "trying again in %.0f s", process_id, exc, self.expire_retry_s)  # fmt: skip
            self._watcher.schedule(self.expire_retry_s, lambda: self._expire(process_id))
            return
        if ended:
            self._watcher.schedule(self.kill_grace, lambda: self._force(t))

    @staticmethod
    def _await_group_end(spawned: SpawnedProcess, env: Environment, seconds: float) -> bool:
        """Poll (bounded) until no member of the group runs; False if some still do."""
        deadline = time.monotonic() + seconds
        while env.signal(spawned, 0):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def _force(self, t: Tracked) -> None:
        """KILL whatever of the process group is left, leader or not (if any is)."""
        spawned = t.record.spawned()
        if not t.env.signal(spawned, 0):
            return  # it ended on the TERM
        with t.lock:
            t.forced = True
        t.env.signal(spawned, signal.SIGKILL)
