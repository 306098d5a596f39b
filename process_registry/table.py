"""The process registry of one worker: start, observe, stop and adopt background processes.

Contracts (docs/architecture.md, "Background processes" and "Identity"):

* Every method takes the caller's *already verified* session id. Live process
  actions (poll, log, wait, kill, list) are owner-only; reading a finished
  process's receipt is allowed to the owner or its compression continuation.
  A process id alone authorizes nothing: denial raises :class:`PermissionDenied`.
* When a process ends: its receipt is written first, then waiters are
  released (completion event), then its checkpoint is removed. Exactly one
  receipt per process, also when a kill races the exit.
* Output stays in the process's output file (a private spool outside
  ``SBX_HOME`` for local processes, since it is unredacted); the registry holds
  no output in memory. Reads are by byte offset and never split a UTF-8 sequence.
  The file keeps at most ``output_cap`` bytes on disk, the newest
  (:mod:`process_registry.output_cap`); reads never return its discarded head.
* :meth:`ProcessTable.adopt_all` adopts a checkpointed process only when
  pid, start time and boot id match and its writer is gone; otherwise it
  never signals it, and records its true exit status (or ``lost``).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from environments.base import Environment, SpawnedProcess
from environments.errors import SandboxError, Unsupported

from .adoption import adopt_all, adopt_one
from .atomic import ensure_private_dir
from .checkpoints import CheckpointStore
from .completion import ProcessCompletion
from .continuations import ContinuationStore
from .models import (
    ProcessInfo,
    ProcessRecord,
    ProcessTableError,
    WriterIdentity,
    redact,
)
from .observing import ProcessObserving
from .output_cap import DEFAULT_PROCESS_OUTPUT_CAP, CapState, OutputCapSweeper, validate_cap
from .receipts import DEFAULT_MAX_AGE, DEFAULT_MAX_COUNT, ReceiptStore
from .runtime_dir import runtime_dir
from .tokens.formats import validate_session_id
from .tokens.sealer import Sealer
from .tracking import AdoptionReport, Tracked, live_info
from .watcher import ExitWatcher

log = logging.getLogger(__name__)

EnvironmentLookup = Callable[[ProcessRecord], Environment | None]
"""Returns the environment an adopted record's process lives in (None: not reachable now)."""


class PtyUnsupported(ProcessTableError, ValueError):
    """``pty`` was asked of a backend that cannot run background processes on a pty."""


class InputUnsupported(ProcessTableError, ValueError):
    """``write`` to a process that takes no input (not started with ``pty``, or ended)."""


class ProcessUnreachable(ProcessTableError):
    """A process's sandbox did not answer a signal meant for it (it may still run)."""


class ProcessTable(ProcessCompletion, ProcessObserving):
    """Background processes of one worker over one ``SBX_HOME``."""

    def __init__(
        self,
        home: Path,
        environment_lookup: EnvironmentLookup,
        *,
        receipts: ReceiptStore | None = None,
        kill_grace: float = 2.0,
        redact_live: bool = True,
        spool_dir: Path | None = None,
        poll_interval: float = 0.05,
        on_finished: Callable[[str, str], None] | None = None,
        receipt_max_age: float = DEFAULT_MAX_AGE,
        receipt_max_count: int = DEFAULT_MAX_COUNT,
        output_cap: int = DEFAULT_PROCESS_OUTPUT_CAP,
        writer_gone: Callable[[WriterIdentity], bool] | None = None,
        on_started: Callable[[ProcessRecord], None] | None = None,
        receipt_sealer: Sealer | None = None,
    ) -> None:
        """``on_finished(process_id, owner)`` runs once per process after its receipt is
        written and its waiters released, before its checkpoint is removed (errors logged).
        ``on_started(record)`` runs once a process is started and checkpointed.
        ``receipt_max_age`` (seconds) and ``receipt_max_count`` bound retention.
        ``output_cap``: bytes of each new process's output kept on disk (0: unlimited).
        ``writer_gone(writer)`` says whether a checkpoint's writer is surely gone
        (default: :meth:`WriterIdentity.is_gone`, which can only tell on this host).
        ``receipt_sealer`` seals receipts and chain heads (see ``ReceiptStore``)."""
        self.home = Path(home)
        self.on_finished = on_finished
        self.on_started = on_started
        self.writer_gone: Callable[[WriterIdentity], bool] = writer_gone or WriterIdentity.is_gone
        self.claim: Callable[[ProcessRecord], bool] | None = None
        """``claim(record)``, asked before this home adopts a dead writer's checkpoint:
        False when another worker took the process over (a fleet's shared copy), and
        then this home's checkpoint is dropped (None: every checkpoint is this home's)."""
        ensure_private_dir(self.home)
        self.environment_lookup = environment_lookup
        self.continuations = ContinuationStore(self.home)
        self.receipts = receipts or ReceiptStore(
            self.home,
            continuations=self.continuations,
            max_age=receipt_max_age,
            max_count=receipt_max_count,
            sealer=receipt_sealer,
        )
        self.checkpoints = CheckpointStore(self.home)
        self.kill_grace = kill_grace
        self.redact_live = redact_live
        self.output_cap = validate_cap(output_cap)
        # Raw output is unredacted: keep it out of SBX_HOME, in a private per-home spool.
        self.spool = ensure_private_dir(spool_dir or runtime_dir(self.home) / "spool")
        self._lock = threading.Lock()
        self._live: dict[str, Tracked] = {}
        self._finished: OrderedDict[str, Tracked] = OrderedDict()
        self._watcher = ExitWatcher(self._on_exit, poll_interval=poll_interval)
        self._sweeper = OutputCapSweeper(self._watcher.schedule)

    # -- starting --------------------------------------------------------------------------

    def start(
        self,
        env: Environment,
        command: str,
        *,
        owner_session_id: str,
        workdir: str | None = None,
        env_vars: dict[str, str] | None = None,
        timeout: float | None = None,
        pty: bool = False,
    ) -> ProcessRecord:
        """Spawn ``command`` detached in ``env``, checkpoint it and watch it.

        ``timeout`` (seconds) kills it (TERM, grace, KILL) with status ``timeout``.
        ``pty`` runs it on a pseudo-terminal (local backend only, else
        :class:`PtyUnsupported`); :meth:`write` then sends it input.
        """
        validate_session_id(owner_session_id)
        if pty and not env.supports_pty:
            raise PtyUnsupported(
                f"pty background processes are not supported on the {env.backend!r} backend; "
                "start it without pty"
            )
        process_id = "p" + secrets.token_hex(8)
        output_path, status_path = env.process_paths(process_id, str(self.spool))
        start = env.spawn_on_pty if pty else env.spawn
        spawned = start(
            command,
            output_path=output_path,
            status_path=status_path,
            workdir=workdir,
            env=env_vars,
        )
        record = ProcessRecord(
            process_id=process_id,
            pid=spawned.pid,
            pgid=spawned.pgid,
            pid_start_time=spawned.start_time,
            boot_id=env.boot_id(),
            writer=self.checkpoints.me,
            owner_session_id=owner_session_id,
            backend=env.backend,
            sandbox_id=env.sandbox_id,
            command=redact(command),
            cwd=None if workdir is None else redact(workdir),  # a path may hold a secret
            output_path=spawned.output_path,
            status_path=spawned.status_path,
            started_at=time.time(),
            pty=pty,
            timeout=timeout,
            output_cap=self.output_cap,
        )
        # Watch first, checkpoint second: a short process's exit is handled while its
        # checkpoint is written; only the checkpoint's removal waits for that write.
        tracked = self.track(record, env, spawned, checkpointed=False)
        try:
            stored = self.checkpoints.write(record)  # stores the command redacted
        finally:
            tracked.checkpointed.set()
        if self.on_started is not None:
            try:
                self.on_started(stored)
            except Exception:
                log.exception("on_started failed for %s", stored.process_id)
        return stored

    def track(
        self,
        record: ProcessRecord,
        env: Environment,
        spawned: SpawnedProcess,
        *,
        checkpointed: bool = True,
    ) -> Tracked:
        """Watch ``record``'s process until it ends, sweeping its output file to its cap
        (used by :meth:`start` and adoption)."""
        tracked = self._new_tracked(record, env)
        if checkpointed:
            tracked.checkpointed.set()
        with self._lock:
            self._live[record.process_id] = tracked
        self._watcher.watch(record.process_id, env, spawned, local=env.processes_on_worker_host)
        if record.timeout is not None:
            remaining = record.started_at + record.timeout - time.time()
            self._watcher.schedule(max(0.0, remaining), lambda: self._expire(record.process_id))
        self._sweeper.start(tracked)
        return tracked

    def _new_tracked(self, record: ProcessRecord, env: Environment) -> Tracked:
        cap = self.output_cap if record.output_cap is None else record.output_cap
        return Tracked(record, env, cap=CapState(cap))

    def live_count(self) -> int:
        """How many processes this table watches now (started or adopted, not yet ended)."""
        with self._lock:
            return len(self._live)

    def tracks(self, process_id: str) -> bool:
        """True when this registry watches (or recently watched) ``process_id``."""
        return self.owner_of(process_id) is not None

    def owner_of(self, process_id: str) -> str | None:
        """Owner session of a process this registry tracks (None: not tracked here).

        For routing and bookkeeping only: it authorizes nothing.
        """
        with self._lock:
            t = self._live.get(process_id) or self._finished.get(process_id)
        return t.record.owner_session_id if t is not None else None

    # -- completion ------------------------------------------------------------------------

    def finalize_untracked(self, t: Tracked) -> None:
        """Receipt a process that ended out of our sight (adoption): never signalled."""
        t.cap = self._new_tracked(t.record, t.env).cap
        with self._lock:
            self._live[t.record.process_id] = t
        self._finalize(t, None)

    # -- killing ---------------------------------------------------------------------------

    def kill(self, process_id: str, session_id: str) -> ProcessInfo:
        """TERM the process group, KILL it after ``kill_grace``; returns once it ended and
        its receipt is written (and ``on_finished`` ran).

        Status ``killed`` when our signal ended it; a process that had already
        exited keeps its own status. Exactly one receipt either way. Raises
        :class:`ProcessUnreachable` when its sandbox cannot be reached (before the TERM:
        nothing changed).
        """
        t = self._owned(process_id, session_id)
        if t is None:
            return self.poll(process_id, session_id)
        try:
            signalled = self._signal_end(t, "killed")
        except SandboxError as exc:
            raise ProcessUnreachable(
                f"process {process_id} was not killed: its sandbox did not answer ({exc}); "
                "it may still run: kill it again once the sandbox answers"
            ) from exc
        if signalled:
            # Give the whole group the grace period (members may outlive the leader:
            # a command that ignores TERM under a shell that does not), then KILL it.
            spawned = t.record.spawned()
            try:
                self._await_group_end(spawned, t.env, self.kill_grace)
                self._force(t)
                # KILL is delivered asynchronously: return once nothing of the group runs.
                self._await_group_end(spawned, t.env, 5.0)
            except SandboxError as exc:
                raise ProcessUnreachable(
                    f"process {process_id} got the TERM, then its sandbox stopped answering "
                    f"({exc}); it may still run: kill it again once the sandbox answers"
                ) from exc
        # Also when it had just ended on its own: return only once its receipt exists.
        t.done.wait(self.kill_grace + 5.0)
        return live_info(t)

    # -- input -----------------------------------------------------------------------------

    def write(self, process_id: str, session_id: str, data: str) -> int:
        """Send ``data`` (UTF-8) to the terminal of a running ``pty`` process; bytes sent.

        Owner-only like every action. Raises :class:`InputUnsupported` for a
        process started without ``pty``, one that ended, or one only a
        receipt remains of.
        """
        t = self._owned(process_id, session_id)
        if t is None:
            self.receipts.read(process_id, session_id)  # NotFound / PermissionDenied first
            raise InputUnsupported(f"process {process_id} has ended: it takes no input")
        if not t.record.pty:
            raise InputUnsupported(
                f"process {process_id} was not started with pty: true, so it takes no input"
            )
        if t.done.is_set():
            raise InputUnsupported(f"process {process_id} has ended: it takes no input")
        try:
            return t.env.write_input(t.record.spawned(), data.encode())
        except (OSError, Unsupported) as exc:
            raise InputUnsupported(f"process {process_id}: {exc}") from None

    # -- adoption and shutdown -------------------------------------------------------------

    def adopt_all(self, select: Callable[[ProcessRecord], bool] | None = None) -> AdoptionReport:
        """Take over the checkpoints of dead workers (see :mod:`process_registry.adoption`);
        only those ``select`` accepts, when given."""
        return adopt_all(self, select)

    def adopt_one(self, record: ProcessRecord, env: Environment) -> AdoptionReport:
        """Adopt one process of a dead worker recorded elsewhere (see
        :func:`process_registry.adoption.adopt_one`)."""
        return adopt_one(self, record, env)

    def close(self) -> None:
        """Stop watching; processes keep running and later workers can adopt them."""
        self._watcher.close()
