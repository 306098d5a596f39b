"""The approval policy: decide whether one terminal command may run now.

Contract of :meth:`ApprovalGuard.check`, evaluated in this order:

0. A command longer than ``approvals.max_command_bytes`` (UTF-8) raises
   :class:`~registry.approval.limits.CommandTooLong` (a ``ValueError``) before
   any analysis.
1. Hardline -> ``blocked``, in every mode (``off`` included) and every backend.
2. ``command_denylist`` match (pattern key, or command glob against the whole
   command or any simple command inside it) -> ``blocked``.
3. No dangerous pattern -> ``allow``. Mode ``off`` -> ``allow``.
4. Each finding's key is covered by the backend's explicit relaxation
   (``approvals.backend_policy``; default: every backend is checked,
   containers included), the allowlist's pattern keys, or the session's
   approved keys; or a literal/glob allowlist entry matches the whole
   (non-compound) command; or a once-grant for this exact command in this
   session exists (consumed now) -> ``allow``.
5. Mode ``smart``: the judge's APPROVE -> ``allow`` (this run only), DENY ->
   ``blocked``, anything else -> step 6.
6. ``approval_required`` with a pending approval that expires after
   ``approvals.timeout`` seconds; concurrent checks of the same command in the
   same session share one approval id.

An unattended worker therefore never runs a dangerous command without an
explicit answer: silence expires into nothing. If the approval store fails,
dangerous commands are ``blocked`` (fail closed); benign ones never touch it.
A command the analysis cannot finish within its budget is dangerous
(``analysis_budget_exhausted``): it needs approval like any other.

:meth:`ApprovalGuard.check_pty_write` applies the same policy to input
written to a pty process, line by line (:class:`~registry.approval.pty.PtyLineBuffer`).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from registry.approval.config import ApprovalConfigSource, ApprovalSettings, JudgeSettings, Rules
from registry.approval.context import in_directory, with_directory
from registry.approval.decision import ApprovalDecision, Outcome
from registry.approval.detect import PTY_UNMODELLED, Analysis, Finding, analyze_command
from registry.approval.limits import CommandTooLong, command_bytes
from registry.approval.pty import PtyLineBuffer
from registry.approval.smart import JudgeClient
from registry.approval.store import ApprovalStore, MemoryApprovalStore, PendingApproval, Scope

__all__ = ["ApprovalDecision", "ApprovalGuard", "Outcome"]

log = logging.getLogger(__name__)

Mode = Literal["manual", "smart", "off"]
ApprovalStatus = Literal["pending", "approved", "denied", "expired", "unknown"]


def _new_id() -> str:
    return "apr_" + secrets.token_hex(12)


class ApprovalGuard:
    """Applies the approval policy; one instance per worker, thread-safe.

    ``store`` holds pending approvals and grants (use a
    :class:`~registry.approval.redis_store.RedisApprovalStore` when several
    workers serve the same sessions); ``config`` the cached configuration file;
    ``mode`` overrides ``approvals.mode``; ``judge`` overrides
    ``approvals.judge``; ``clock`` returns wall-clock seconds;
    ``protected_paths`` are added to ``approvals.protected_paths`` (the worker
    passes its ``SBX_HOME`` and ``config.yaml``: writing or deleting them needs
    approval). ``judge_view``: what a smart-mode judge (a third party) is sent of a command.
    """

    def __init__(
        self,
        *,
        store: ApprovalStore | None = None,
        config: ApprovalConfigSource | None = None,
        mode: Mode | None = None,
        judge: JudgeClient | None = None,
        clock: Callable[[], float] = time.time,
        id_factory: Callable[[], str] = _new_id,
        protected_paths: Sequence[str] = (),
    ) -> None:
        self.store: ApprovalStore = store if store is not None else MemoryApprovalStore()
        self._protected = tuple(str(p) for p in protected_paths)
        self.config = config if config is not None else ApprovalConfigSource(None)
        self._mode = mode
        self._judge = judge
        self._judge_cache: tuple[JudgeSettings, JudgeClient] | None = None
        self._clock = clock
        self._new_id = id_factory
        self.judge_view: Callable[[str], str] = str  # the worker sets its redactor

    @classmethod
    def from_config_file(
        cls,
        path: str | os.PathLike[str] | None,
        *,
        store: ApprovalStore | None = None,
        redis_client: Any | None = None,
        redis_prefix: str = "sbx:approval:",
        mode: Mode | None = None,
        clock: Callable[[], float] = time.time,
        protected_paths: Sequence[str] = (),
        document: Callable[[], Any] | None = None,
    ) -> ApprovalGuard:
        """Guard for a worker. ``path``: the YAML config (``$SBX_HOME/config.yaml``; None:
        defaults only, "always" kept in memory). With ``redis_client`` (on the broker's
        Redis) approvals are shared by every worker through a
        :class:`~registry.approval.redis_store.RedisApprovalStore`, else they live in this
        process. ``mode``, ``protected_paths`` as in the constructor. ``document()``, when
        given, returns the policy document instead of reading ``path`` (see
        :class:`~registry.approval.config.ApprovalConfigSource`). Raises
        :class:`~registry.approval.config.ApprovalConfigError` for an unreadable file."""
        if store is None and redis_client is not None:
            from registry.approval.redis_store import RedisApprovalStore

            store = RedisApprovalStore(redis_client, prefix=redis_prefix)
        config = ApprovalConfigSource(path, document=document)
        return cls(store=store, config=config, mode=mode, clock=clock,
                   protected_paths=protected_paths)  # fmt: skip

    # -- configuration ---------------------------------------------------------
    def reload(self) -> None:
        """Re-read the configuration file now."""
        self.config.reload()

    def _judge_for(self, settings: ApprovalSettings) -> JudgeClient | None:
        if self._judge is not None:
            return self._judge
        if settings.judge is None:
            return None
        cached = self._judge_cache
        if cached is None or cached[0] != settings.judge:
            js = settings.judge
            client = JudgeClient(
                js.url, api_key=js.resolved_api_key(), model=js.model, timeout=js.timeout
            )
            self._judge_cache = cached = (js, client)
        return cached[1]

    # -- the decision ----------------------------------------------------------
    def check(
        self,
        command: str,
        *,
        session_id: str,
        backend: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ApprovalDecision:
        """Decide whether ``command`` may run now in ``session_id`` on ``backend``.

        ``env`` is the session's exported environment when known (it resolves
        ``$X`` program names and ``$HOME``); ``cwd`` the directory it runs in when
        known (:mod:`~registry.approval.context`: relative paths resolve there, and
        pending approvals and grants are for the command in that directory). Raises
        :class:`~registry.approval.limits.CommandTooLong` for a command longer
        than ``approvals.max_command_bytes``.
        """
        settings, rules = self.config.get()
        subject, analysis = self._analysis(command, env, cwd, settings)
        return self._decide(subject, analysis, settings, rules, session_id, backend)

    def _analysis(
        self, command: str, env: Mapping[str, str] | None, cwd: str | None, s: ApprovalSettings
    ) -> tuple[str, Analysis]:
        """``command`` as judged in ``cwd``, and its analysis; raises as :meth:`check`."""
        length = command_bytes(command, s.max_command_bytes)
        if length > s.max_command_bytes:
            raise CommandTooLong(length, s.max_command_bytes)
        protected = tuple(dict.fromkeys((*s.protected_paths, *self._protected)))
        analysis = analyze_command(command, env=with_directory(env, cwd), protected=protected,
                                   max_bytes=s.max_command_bytes)  # fmt: skip
        return in_directory(command, cwd), analysis

    def check_gated_tool(
        self, tool: str, args_text: str, *, session_id: str, backend: str
    ) -> ApprovalDecision:
        """Decide whether approval-gated tool ``tool`` may run with ``args_text`` (its
        arguments as sent): it always needs approval, answered like a command's (an
        approval of this exact call once, of the tool for the session, or always)."""
        settings, rules = self.config.get()
        key = f"gated_tool:{tool}"
        finding = Finding(key, f"{tool} is a tool that asks for approval", False)
        text = f"{tool} {args_text}"
        analysis = Analysis(
            command=text, normalized=text, findings=(finding,), segments=(text,), simple=False
        )
        return self._decide(text, analysis, settings, rules, session_id, backend)

    def check_pty_write(
        self,
        buffer: PtyLineBuffer,
        data: str,
        *,
        session_id: str,
        backend: str,
        env: Mapping[str, str] | None = None,
    ) -> ApprovalDecision:
        """Decide whether ``data`` may be written to the pty whose input ``buffer`` models.

        Every line the write submits is checked as a command (the whole command typed so
        far, so ``r`` then ``m -rf DIR\\n`` is ``rm -rf DIR``), read both as a line editor
        and as a program without one would; a line whose editing could not be modelled
        needs approval (``pty_input_unmodelled``), one a hard-line rule blocks in the
        directory the typed lines tell (``buffer.cwd``: a hint, it only adds blocks) is
        blocked. Only when every line is allowed is the write applied to ``buffer``; the
        caller then writes ``data``. Raises ``CommandTooLong`` like :meth:`check`."""
        lines = buffer.peek_both(data)
        for line, cwd in zip(lines, buffer.cwd.along(lines), strict=True):
            if cwd is not None and line.opaque is None:
                settings, rules = self.config.get()
                subject, hinted = self._analysis(line.text, env, cwd, settings)
                if hinted.hardline is not None:
                    return self._decide(subject, hinted, settings, rules, session_id, backend)
            if line.opaque is not None and (line.text.strip() or buffer.rebound):
                settings, rules = self.config.get()
                finding = Finding(PTY_UNMODELLED, f"pty input: {line.opaque}", False)
                analysis = Analysis(line.text, line.text, (finding,), (line.text,), False)
                decision = self._decide(line.text, analysis, settings, rules, session_id, backend)
            else:
                decision = self.check(line.text, session_id=session_id, backend=backend, env=env)
            if not decision.allowed:
                return decision
        buffer.feed(data)
        return ApprovalDecision(outcome="allow")

    def _decide(
        self,
        command: str,
        analysis: Analysis,
        settings: ApprovalSettings,
        rules: Rules,
        session_id: str,
        backend: str,
    ) -> ApprovalDecision:
        hard = analysis.hardline
        if hard is not None:
            log.info("approval: hardline %s blocked (session %s, backend %s)",
                     hard.key, session_id, backend)  # fmt: skip
            return ApprovalDecision(
                outcome="blocked",
                pattern_key=hard.key,
                description=hard.description,
                reason=f"hardline: {hard.description}; this command can never run",
            )
        denied_by = rules.denied(analysis)
        if denied_by is not None:
            first = analysis.dangerous
            return ApprovalDecision(
                outcome="blocked",
                pattern_key=first.key if first else None,
                description=first.description if first else None,
                reason=f"denied by command_denylist entry {denied_by!r}",
            )
        if not analysis.findings:
            return ApprovalDecision(outcome="allow")
        mode = self._mode or settings.mode
        if mode == "off":
            return ApprovalDecision(outcome="allow", reason="approvals are off")
        try:
            return self._check_dangerous(
                command, analysis, settings, rules, session_id, backend, mode
            )
        except Exception as exc:  # fail closed: a broken store must not let the command through
            log.error("approval: store error (%s); blocking", type(exc).__name__)
            first = analysis.findings[0]
            return ApprovalDecision(
                outcome="blocked",
                pattern_key=first.key,
                description=first.description,
                reason="approval state unavailable; try again later",
            )

    def _check_dangerous(
        self,
        command: str,
        analysis: Analysis,
        settings: ApprovalSettings,
        rules: Rules,
        session_id: str,
        backend: str,
        mode: Mode,
    ) -> ApprovalDecision:
        relaxed = settings.relaxed_keys(backend)
        if relaxed == "all":
            return ApprovalDecision(outcome="allow", reason=f"backend_policy allows {backend}")
        session_keys = self.store.session_keys(session_id)
        open_findings = [
            f
            for f in analysis.findings
            if f.key not in relaxed and f.key not in rules.allow_keys and f.key not in session_keys
        ]
        if not open_findings:
            return ApprovalDecision(outcome="allow", reason="pattern approved")
        if rules.allowed_text(analysis):
            return ApprovalDecision(outcome="allow", reason="command allowlisted")
        if self.store.always_allowed(command):
            return ApprovalDecision(outcome="allow", reason="this exact command approved always")
        now = self._clock()
        if self.store.consume_once(session_id, command, now=now):
            return ApprovalDecision(outcome="allow", reason="approved once")
        first = open_findings[0]
        if mode == "smart":
            judge = self._judge_for(settings)
            shown = self.judge_view(command)
            verdict = judge.judge(shown, first.key, first.description) if judge else "escalate"
            if verdict == "approve":
                return ApprovalDecision(
                    outcome="allow",
                    pattern_key=first.key,
                    description=first.description,
                    reason="approved by judge",
                )
            if verdict == "deny":
                return ApprovalDecision(
                    outcome="blocked",
                    pattern_key=first.key,
                    description=first.description,
                    reason="denied by the smart-approval judge",
                )
        record = PendingApproval(
            approval_id=self._new_id(),
            session_id=session_id,
            command=command,
            pattern_key=first.key,
            pattern_keys=tuple(f.key for f in open_findings),
            description=first.description,
            created_at=now,
            expires_at=now + settings.timeout,
        )
        record = self.store.create_or_get_pending(record, now=now)
        log.info("approval: %s requires approval %s (session %s)",
                 record.pattern_key, record.approval_id, session_id)  # fmt: skip
        return ApprovalDecision(
            outcome="approval_required",
            pattern_key=record.pattern_key,
            description=record.description,
            approval_id=record.approval_id,
            reason="approval required",
        )

    # -- answers ---------------------------------------------------------------
    def approve(self, approval_id: str, scope: Scope, *, session_id: str) -> PendingApproval:
        """Approve a pending approval of ``session_id``. ``once``: the identical command
        (in the same directory) may run one time in that session; ``session``: its pattern
        keys are approved for the rest of the session; ``always``: this exact command (not
        its pattern), in that directory, runs without approval in any session from now on
        (kept in the approval store, never in the policy file). Raises
        :class:`~registry.approval.store.ApprovalError` subclasses for unknown, expired,
        already answered or foreign approvals."""
        if scope not in ("once", "session", "always"):
            raise ValueError(f"scope must be once, session or always, not {scope!r}")
        settings, _ = self.config.get()
        record = self.store.resolve(
            approval_id,
            approve=True,
            scope=scope,
            session_id=session_id,
            now=self._clock(),
            once_ttl=settings.once_ttl,
        )
        log.info("approval: %s approved (%s) in session %s", approval_id, scope, session_id)
        return record

    def deny(self, approval_id: str, *, session_id: str | None = None) -> PendingApproval:
        """Deny a pending approval (and check it belongs to ``session_id`` when given)."""
        record = self.store.resolve(
            approval_id,
            approve=False,
            scope=None,
            session_id=session_id,
            now=self._clock(),
            once_ttl=0.0,
        )
        log.info("approval: %s denied", approval_id)
        return record

    def get(self, approval_id: str) -> PendingApproval | None:
        """The approval record, whatever its state, or None."""
        return self.store.get(approval_id)

    def status(self, approval_id: str) -> ApprovalStatus:
        """``pending``, ``approved``, ``denied``, ``expired`` or ``unknown``."""
        record = self.store.get(approval_id)
        if record is None:
            return "unknown"
        if record.status == "pending" and record.expired(self._clock()):
            return "expired"
        return record.status

    def clear_session(self, session_id: str) -> None:
        """Forget every approval granted to ``session_id`` (session end)."""
        self.store.clear_session(session_id)
