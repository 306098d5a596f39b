"""Adoption at worker start: take over the checkpoints of dead workers, PID-safely.

For each checkpoint (under the store's exclusive adoption lock, so two
restarting workers never both take one):

* a receipt exists already: its writer died between receipt and checkpoint
  removal; just remove the checkpoint;
* the writer still runs, or the environment is unreachable: skip it;
* pid + start time + boot id match a live process -- the worker host's for
  local processes, the sandbox kernel's (through the sandbox) for the others:
  adopt and watch it, *whatever its status file says*. The sandbox can write
  that file (it lies in the session's spool): were it believed while the
  process runs, a forged code would finalize a live process and leave it
  running untracked, uncapped and unkillable. A wrapper that wrote its status
  and is exiting is adopted and finalized a moment later, with that code;
* anything else (ended, recycled pid, another boot): finalize without
  signalling, with the code of the status file -- only now, the process being
  gone, does it count; with no status file the receipt says ``lost``, never
  an invented exit code.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Literal

from environments.errors import SandboxError

from .checkpoints import adoptable
from .models import ProcessRecord
from .tracking import AdoptionReport, Tracked, status_file_code

if TYPE_CHECKING:
    from environments.base import Environment

    from .registry import ProcessTable

Action = Literal["adopt", "finalize", "skip"]


def _decide(reg: ProcessTable, rec: ProcessRecord, env: Environment) -> tuple[Action, str]:
    if env.processes_on_worker_host and rec.boot_id is not None:
        # The status file is not asked: a live, matching process is adopted (see above).
        decision = adoptable(rec, me=reg.checkpoints.me, writer_gone=reg.writer_gone)
        return decision.action, decision.reason
    if not reg.writer_gone(rec.writer):
        return "skip", "its writer is still running"
    return _decide_in_sandbox(rec, env)


def _decide_in_sandbox(rec: ProcessRecord, env: Environment) -> tuple[Action, str]:
    """The PID-safety rule inside a sandbox: its kernel's boot id, then pid + start time."""
    if rec.boot_id is not None and env.boot_id() not in (None, rec.boot_id):
        return "finalize", "recorded under another boot of the sandbox's kernel"
    running = env.is_running(rec.spawned())
    if running and rec.pid_start_time is not None:
        return "adopt", "running: pid and start time match"
    # Without a recorded start time a live pid may be a recycled one: then an exit code
    # the wrapper left says the command ended, and the pid is not signalled.
    if status_file_code(env, rec.status_path) is not None:
        return "finalize", "its command has ended (status file written)"
    if running:
        return "adopt", "running"
    return "finalize", "ended"


def adopt_all(reg: ProcessTable) -> AdoptionReport:
    """Apply the rules of the module docstring to every checkpoint of ``reg``'s home."""
    report = AdoptionReport()
    with reg.checkpoints.locked():
        for rec in reg.checkpoints.load_all():
            if reg.tracks(rec.process_id):
                continue
            if reg.receipts.exists(rec.process_id):
                if reg.on_finished is not None:
                    with contextlib.suppress(Exception):
                        reg.on_finished(rec.process_id, rec.owner_session_id)
                with contextlib.suppress(Exception):
                    reg.checkpoints.take_over(rec)
                    reg.checkpoints.remove(rec.process_id)
                report.finalized.append(rec.process_id)
                continue
            env = reg.environment_lookup(rec)
            if env is None:
                report.skipped[rec.process_id] = "its environment is not reachable"
                continue
            try:
                action, reason = _decide(reg, rec, env)
            except SandboxError as exc:
                # Its sandbox cannot be asked now (an ssh host that is down): what runs
                # there may well run on, so it is neither taken for ended nor allowed to
                # stop the adoption of the others. Its checkpoint stays for a later try.
                report.skipped[rec.process_id] = f"its sandbox cannot be asked: {exc}"
                continue
            if action == "skip":
                report.skipped[rec.process_id] = reason
                continue
            rec = reg.checkpoints.take_over(rec)
            _apply(reg, rec, env, action, report)
    return report


def adopt_one(reg: ProcessTable, rec: ProcessRecord, env: Environment) -> AdoptionReport:
    """Adopt (or finalize) one process of a dead worker found elsewhere than this home's
    checkpoints (a fleet's shared record), after the caller made sure its writer is gone
    and took it over; ``env`` is its re-attached sandbox. The record becomes this home's
    checkpoint, written by this worker."""
    report = AdoptionReport()
    if reg.tracks(rec.process_id):
        return report
    if reg.receipts.exists(rec.process_id):
        report.finalized.append(rec.process_id)
        return report
    action, _ = _decide_in_sandbox(rec, env)
    rec = reg.checkpoints.write(rec)
    _apply(reg, rec, env, action, report)
    return report


def _apply(
    reg: ProcessTable, rec: ProcessRecord, env: Environment, action: Action, report: AdoptionReport
) -> None:
    if action == "adopt":
        reg.track(rec, env, rec.spawned())
        report.adopted.append(rec.process_id)
        return
    # Ended (or its pid is someone else's now): never signal, just record.
    t = Tracked(rec, env)
    t.checkpointed.set()
    reg.finalize_untracked(t)
    report.finalized.append(rec.process_id)
