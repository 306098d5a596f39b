"""The worker's background-process service: ``terminal`` with ``background``, ``process``, receipts.

One :class:`ProcessManager` per worker process wraps a :class:`~process_registry.table.ProcessTable`
over ``SBX_HOME`` whose environments are the sessions' sandboxes in the worker's pool.

Contracts:

* Every method takes the caller's *verified* session id (``ctx.session_id``
  for tools; ``worker.service.receipt_ops`` verifies the proof for receipt operations).
  Ownership is checked by the registry; a process id alone authorizes nothing.
* Tool-facing methods never raise for expected failures: unknown ids, bad ids and
  unsupported actions come back as ``{"error": ..., "status": "not_found" | "invalid" |
  "error"}``. Another session's process or receipt answers exactly as an unknown id does
  (``not_found``, same words, answered here and never forwarded), so ids reveal nothing
  about other sessions.
* Routing: each running (started or adopted) process is routed to this worker's
  own queue, and a finished one to its receipt (:mod:`worker.service.process_routes`).
"""

from __future__ import annotations

import builtins
import logging
import threading
from typing import Any

import redis

from environments.base import Environment
from environments.errors import SandboxError, WorkdirNotFound
from environments.pool import SandboxPool
from environments.registry import backend_class
from process_registry.models import (
    NotFound,
    PermissionDenied,
    ProcessRecord,
    ProcessTableError,
)
from process_registry.table import InputUnsupported, ProcessTable, PtyUnsupported
from process_registry.tokens.formats import InvalidSessionId
from process_registry.tokens.sealer import Sealer
from registry.approval import CommandTooLong, PtyLineBuffer
from registry.approval.pty_cwd import start_dir
from registry.tools.process import ProcessArgs
from worker.protocol.ledger import read_route
from worker.protocol.receipt_homes import home_id
from worker.service.boundary import error_fields
from worker.service.fleet_processes import SharedCheckpoints, adopt_orphans, shares_processes
from worker.service.forwarding import ProcessForwarder
from worker.service.process_routes import ProcessRoutes
from worker.settings import Settings

log = logging.getLogger(__name__)

# What a background start answers as a tool error (SandboxError: the sandbox died or
# cannot start).
_START_REFUSED = (WorkdirNotFound, PtyUnsupported, ProcessTableError, SandboxError, ValueError)

_ANSWER_MARGIN_S = 1.0


def _error(message: str, status: str) -> dict[str, Any]:
    return {"error": message, "status": status}


def unknown_process(process_id: str | None) -> dict[str, Any]:
    """The one answer for an unknown process id and for another session's."""
    return _error(f"no process {process_id} in this session", "not_found")


class ProcessManager:
    """Background processes of one worker, over its sandbox pool (see module docstring)."""

    def __init__(
        self,
        settings: Settings,
        pool: SandboxPool,
        *,
        redis_client: redis.Redis | None = None,
        worker_queue: str | None = None,
        kill_grace: float = 2.0,
        worker_id: str = "",
        receipt_sealer: Sealer | None = None,
    ) -> None:
        """``receipt_sealer`` seals receipts and chain heads (the worker's keyring)."""
        self.settings = settings
        self.pool = pool
        self.redis = redis_client
        self.worker_queue = worker_queue
        self.worker_id = worker_id
        self._pty_lines: dict[str, PtyLineBuffer] = {}
        self._pty_lock = threading.Lock()
        self.shared: SharedCheckpoints | None = None
        """The fleet's shared checkpoints (set by ``process_wiring.install_process_manager``)."""
        self.routes = ProcessRoutes(
            redis_client,
            worker_queue,
            worker_id,
            int(settings.receipt_max_age_days * 86400),
            home_id(settings.home),
        )
        self.forwarder: ProcessForwarder | None = None
        """Set by ``process_wiring.install_process_manager`` in a worker with its own queue."""
        self.table = ProcessTable(
            settings.home,
            self._lookup,
            kill_grace=kill_grace,
            redact_live=True,
            on_finished=self._unroute,
            receipt_max_age=settings.receipt_max_age_days * 86400.0,
            receipt_max_count=settings.receipt_max_count,
            output_cap=settings.process_output_cap,
            receipt_sealer=receipt_sealer,
        )

    # -- environments and routes -----------------------------------------------------------

    def _lookup(self, rec: ProcessRecord) -> Environment | None:
        """The sandbox an adopted record's process lives in, or None when unreachable.

        Local processes are reachable from any local sandbox of the owner
        session (created on demand: it costs no shell until used). Other
        backends need the very sandbox that spawned them, still in the pool.
        """
        existing = self.pool.get_existing(rec.owner_session_id, rec.backend)
        if backend_class(rec.backend).processes_on_worker_host:
            if existing is not None:
                return existing
            with self.pool.use(rec.owner_session_id, rec.backend) as env:
                return env
        if existing is not None and existing.sandbox_id == rec.sandbox_id:
            return existing
        # Re-attach: the backend finds the session's sandbox again by its name.
        try:
            with self.pool.use(rec.owner_session_id, rec.backend) as env:
                return env if env.attach() == rec.sandbox_id else None
        except Exception:
            log.warning("cannot re-attach the sandbox of process %s", rec.process_id)
            return None

    def claim(self, rec: ProcessRecord) -> bool:
        """Whether this home may adopt its checkpoint ``rec`` of a dead writer: not when
        another worker of the fleet took the process over from the shared copy (see
        :meth:`SharedCheckpoints.claim`). A ledger out of reach does not stop adoption."""
        if self.shared is None:
            return True
        try:
            return self.shared.claim(rec)
        except redis.RedisError:
            log.warning("could not claim the shared checkpoint of %s", rec.process_id)
            return True

    def _unroute(self, process_id: str, owner: str) -> None:
        """A finished process: the fleet's copy of its checkpoint goes, its route (see
        :mod:`worker.service.process_routes`) and what was typed into it."""
        self._pty_lines.pop(process_id, None)
        if self.shared is not None:
            try:
                self.shared.remove(process_id)
            except redis.RedisError:
                log.warning("could not drop the shared checkpoint of %s", process_id)
        self.routes.finished(process_id, owner)

    def holds_running(self, session_id: str, backend: str) -> bool:
        """True while a process of ``session_id`` runs in its ``backend`` sandbox.

        The pool keeps such sandboxes open past their idle lifetime.
        """
        return any(
            p.backend == backend and p.status == "running" for p in self.table.list(session_id)
        )

    # -- terminal background: true ---------------------------------------------------------

    def start_from_tool(self, args: Any, ctx: Any) -> dict[str, Any]:
        """Start ``args.command`` in the caller's sandbox; ``{"process_id", "pid", "status"}``.

        ``args`` is ``TerminalArgs`` (``command``, ``workdir``, ``pty``); ``ctx``
        a ``ToolContext`` (verified ``session_id``, ``backend``, ``pool``).
        The process starts in the session's cwd and environment unless
        ``workdir`` says otherwise. Failures are ``{"error", "status": "error"}``.
        """
        try:
            with ctx.pool.use(ctx.session_id, ctx.backend) as env:
                env.attach()  # a sandbox stopped or removed since the last call comes back
                rec = self.table.start(
                    env,
                    args.command,
                    owner_session_id=ctx.session_id,
                    workdir=args.workdir,
                    pty=bool(getattr(args, "pty", False)),
                )
                if rec.pty:  # lines typed into it are judged from where its shell starts
                    state = env.session_state()
                    where = start_dir(state.cwd if state else None, args.workdir)
                    self._pty_lines[rec.process_id] = PtyLineBuffer(cwd=where)
        except _START_REFUSED as exc:
            return _error(str(exc), "error")
        self.routes.record(rec.process_id, ctx.session_id)
        return {"process_id": rec.process_id, "pid": rec.pid, "status": "running"}

    # -- the process tool ------------------------------------------------------------------

    def handle(self, args: ProcessArgs, ctx: Any) -> dict[str, Any]:
        """Run one ``process`` tool action for the verified ``ctx.session_id``.

        An action for a process another worker holds is forwarded to it, and
        ``list`` includes the session's processes on other workers
        (:mod:`worker.service.forwarding`).
        """
        session = str(ctx.session_id)
        forwarded = self._forward(args, ctx)
        if forwarded is not None:
            return forwarded
        try:
            if args.action == "list":
                infos = self.table.list(session)
                return {"processes": [i.model_dump(mode="json") for i in infos]}
            if args.process_id is None:
                return _error(f"action {args.action!r} needs a process_id", "invalid")
            pid = args.process_id
            if args.action == "poll":
                return self.table.poll(pid, session).model_dump(mode="json")
            if args.action == "log":
                chunk = self.table.log(pid, session, args.offset, args.limit)
                return chunk.model_dump(mode="json")
            if args.action == "wait":
                budget = max(0.0, float(ctx.remaining()) - _ANSWER_MARGIN_S)
                timeout = budget if args.timeout is None else min(float(args.timeout), budget)
                info = self.table.wait(pid, session, timeout=timeout)
                result = info.model_dump(mode="json")
                if info.status == "running":
                    result["waited_s"] = timeout
                    result["note"] = "still running after the wait; wait again or kill it"
                return result
            if args.action == "kill":
                return self.table.kill(pid, session).model_dump(mode="json")
            return self._write(pid, args.data, ctx)
        except (PermissionDenied, NotFound):
            return unknown_process(args.process_id)
        except (ProcessTableError, InvalidSessionId) as exc:
            return error_fields(exc)

    def _forward(self, args: ProcessArgs, ctx: Any) -> dict[str, Any] | None:
        """The answer of the worker(s) holding what ``args`` asks about; None: answer here."""
        fwd = self.forwarder
        if fwd is None or getattr(ctx, "forwarded", False):
            return None
        session, backend = str(ctx.session_id), str(ctx.backend)
        wait = max(1.0, float(ctx.remaining()) - _ANSWER_MARGIN_S)
        try:
            if args.action == "list":
                queues = fwd.session_queues(session)
                if not queues:
                    return None
                mine = self.table.list(session)
                merged = {i.process_id: i.model_dump(mode="json") for i in mine}
                unreachable = []
                for queue in sorted(queues):
                    answer = fwd.forward(queue, {"action": "list"}, session, backend, wait)
                    if "processes" not in answer:
                        unreachable.append(queue)
                    for item in answer.get("processes", []):
                        merged.setdefault(item["process_id"], item)
                result: dict[str, Any] = {
                    "processes": sorted(merged.values(), key=lambda i: i.get("started_at") or 0)
                }
                if unreachable:
                    result["unreachable_workers"] = unreachable
                return result
            if args.process_id is None or self.table.tracks(args.process_id):
                return None
            holder = fwd.holder_queue(args.process_id, session)
            if holder is None:
                return self._take_from_absent(args.process_id, session)
            return fwd.forward(holder, args.model_dump(exclude_none=True), session, backend, wait)
        except Exception as exc:  # the broker or ledger went away: say so, never raise
            log.warning("forwarding a process action failed", exc_info=True)
            return _error(f"could not reach the worker holding it: {exc}", "error")

    def _take_from_absent(self, process_id: str, session_id: str) -> dict[str, Any] | None:
        """An action for a process whose worker is gone: adopt it here if this worker can
        reach its sandbox (None: answer here); else say where it is (to its owner only)."""
        fwd = self.forwarder
        absent = fwd.absent_holder(process_id) if fwd is not None else None
        if absent is None:
            return None
        route = read_route(self.redis, process_id) if self.redis is not None else None
        if (route or {}).get("session") != session_id:
            return None  # not this session's: answered as unknown, like any other id
        self.adopt_absent(only=process_id)
        if self.table.tracks(process_id) or self.table.receipts.exists(process_id):
            return None
        return _error(
            f"the worker holding process {process_id} ({absent}) is gone and this worker "
            "cannot reach it; a worker on that host adopts it when it starts",
            "error",
        )

    def _write(self, process_id: str, data: str | None, ctx: Any) -> dict[str, Any]:
        if data is None:
            return _error("action 'write' needs data (the text to type)", "invalid")
        # Ownership first: nothing is judged, or told, about another session's process
        # (raises as an unknown id does: see ``handle``).
        self.table.check_owner(process_id, ctx.session_id)
        guard = ctx.components.get("approval") if isinstance(ctx.components, dict) else None
        if guard is not None:
            # Input to a pty shell is a command too, judged a whole line at a time: the
            # buffer remembers what was typed so far (``r`` then ``m -rf DIR\n``).
            with self._pty_lock:
                lines = self._pty_lines.setdefault(process_id, PtyLineBuffer())
            try:
                decision = guard.check_pty_write(
                    lines, data, session_id=ctx.session_id, backend=ctx.backend
                )
            except CommandTooLong as exc:
                return _error(str(exc), "invalid")
            refusal = decision.to_tool_result()
            if refusal is not None:
                return dict(refusal)
        try:
            sent = self.table.write(process_id, ctx.session_id, data)
        except InputUnsupported as exc:
            return _error(str(exc), "error")
        return {"process_id": process_id, "bytes_written": sent, "status": "running"}

    # -- lifecycle -------------------------------------------------------------------------

    def adopt_all(self) -> dict[str, Any]:
        """Adopt dead workers' processes (at worker start); route the adopted to this worker.

        Finalized ones lose their route (see ``_unroute``): their receipt answers.
        """
        report = self.table.adopt_all()  # claims the fleet's copy first: see ``claim``
        for process_id in report.adopted:
            owner = self.table.owner_of(process_id)
            if owner is not None:
                self.routes.record(process_id, owner)
        report.adopted.extend(self.adopt_orphans())
        if report.adopted or report.finalized or report.skipped:
            log.info(
                "adoption: %d adopted, %d finalized, %d skipped",
                len(report.adopted),
                len(report.finalized),
                len(report.skipped),
            )
        return {"adopted": report.adopted, "finalized": report.finalized, "skipped": report.skipped}

    def adopt_absent(self, only: str | None = None) -> builtins.list[str]:
        """While the worker runs (its reaper, an action for a process whose worker is
        gone): adopt what absent workers left -- this home's local processes, whose
        writer died (another worker of this home: it may never be restarted, and the
        processes would have no receipt till one is), then the fleet's orphans. The ids
        adopted; ``only`` limits it to one process."""

        def local(rec: ProcessRecord) -> bool:
            if only is not None and rec.process_id != only:
                return False
            # The others are the fleet's: taken from the shared copy, one worker each.
            return self.shared is None or not shares_processes(rec.backend)

        report = self.table.adopt_all(local)
        for process_id in report.adopted:
            owner = self.table.owner_of(process_id)
            if owner is not None:
                self.routes.record(process_id, owner)
        if report.adopted or report.finalized:
            log.info(
                "adoption of absent workers' processes: %d adopted, %d finalized",
                len(report.adopted),
                len(report.finalized),
            )
        return report.adopted + self.adopt_orphans(only)

    def adopt_orphans(self, only: str | None = None) -> builtins.list[str]:
        """Take over processes of absent workers in sandboxes this worker can reach
        (see :mod:`worker.service.fleet_processes`); route them here."""
        if self.shared is None:
            return []
        try:
            taken = adopt_orphans(self.shared, self.table, self._lookup, only=only)
        except redis.RedisError:
            log.warning("could not read the fleet's shared checkpoints", exc_info=True)
            return []
        for process_id in taken:
            owner = self.table.owner_of(process_id)
            if owner is not None and self.table.tracks(process_id):
                self.routes.record(process_id, owner)
        return taken

    def linger(self, session_id: str, timeout: float) -> builtins.list[dict[str, Any]]:
        """Wait (bounded) for the session's processes; their final views."""
        return [i.model_dump(mode="json") for i in self.table.linger(session_id, timeout)]

    def close(self) -> None:
        """Stop watching; the processes keep running for the next worker to adopt."""
        if self.forwarder is not None:
            self.forwarder.close()
        self.table.close()
