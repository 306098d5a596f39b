"""The synchronous client: send a session's tool calls to workers, get tool-result JSON back.

``SandboxClient.tool_call`` returns exactly what a model would see. The typed
helpers parse it into pydantic models. Both wait for the worker, and turn a
call whose worker died into a ``lost`` result instead of waiting forever.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any, Literal

import redis
from celery import Celery

from process_registry.sessions import (
    InvalidSessionId,
    load_or_create_secret,
    validate_session_id,
)
from worker.broker.connection import display_url, resolve_broker_url, resolve_ledger_url
from worker.broker.sender import CallSender
from worker.client.processes import ProcessClientMixin
from worker.errors import BrokerUnavailable, ClientError, SessionRequired, TokenRequired
from worker.identity import load_signer
from worker.protocol.ledger import CallLedger
from worker.protocol.messages import (
    ApprovalMessage,
    ApprovalResult,
    TerminalResult,
    ToolCallMessage,
)
from worker.protocol.tasks import APPROVAL_TASK, PING_TASK, SESSION_TOOLS
from worker.settings import Settings, get_settings

# Extra time a client waits beyond the command's own timeout.
ANSWER_SLACK_S = 30.0


def _resolve_token(settings: Settings, session_id: str, token: str | None) -> str:
    if token:
        return token
    if settings.session_token is not None and settings.session_id == session_id:
        return settings.session_token.get_secret_value()
    # A client on the worker's machine with access to its secret may mint tokens.
    if settings.secret_key is not None or settings.secret_path.exists():
        return load_signer(settings).token(session_id)
    if settings.broker_url is None:
        # Embedded mode: this home is ours; create the secret the worker will use.
        load_or_create_secret(settings.secret_path)
        return load_signer(settings).token(session_id)
    raise TokenRequired(
        "no session token: set SBX_SESSION_TOKEN (from `sbx session token SESSION_ID` "
        "on a machine holding the secret key)"
    )


def call_budget(args: Any, settings: Settings) -> float:
    """How long to wait for a call: its own timeout (if any) plus slack."""
    timeout = settings.default_timeout
    if isinstance(args, dict) and isinstance(args.get("timeout"), int):
        timeout = min(max(1, args["timeout"]), settings.max_timeout)
    return float(timeout) + ANSWER_SLACK_S


class SandboxClient(ProcessClientMixin):
    """Synchronous client for one session.

    ``broker_url=None`` means ``SBX_BROKER_URL``, or the embedded broker
    (started if needed). ``session_token=None`` means ``SBX_SESSION_TOKEN``, or
    a token minted from the local secret key when this machine holds it.
    Raises :class:`~worker.errors.SessionRequired` without a valid session id and
    :class:`~worker.errors.TokenRequired` when no token can be found or minted.
    """

    def __init__(
        self,
        broker_url: str | None = None,
        session_id: str | None = None,
        session_token: str | None = None,
        *,
        backend: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        sid = session_id or self.settings.session_id
        if not sid:
            raise SessionRequired("a session id is required (argument or SBX_SESSION_ID)")
        try:
            self.session_id = validate_session_id(sid)
        except InvalidSessionId as exc:
            raise SessionRequired(str(exc)) from None
        self.session_token = _resolve_token(self.settings, self.session_id, session_token)
        self.backend = backend
        self.broker_url = broker_url or resolve_broker_url(self.settings)
        # sbx's own state (claims, heartbeats, result mailboxes, routes) lives in the
        # ledger's Redis: the broker itself when it is Redis (see worker.broker.connection).
        self.ledger_url = resolve_ledger_url(self.settings, self.broker_url)
        self.sender = CallSender(self.broker_url, self.ledger_url, self.settings)
        self._known_route: str | None = None
        self.app: Celery = self.sender.app
        """The Celery app messages are published with."""
        self.ledger: CallLedger = self.sender.ledger
        """The ledger answers are collected from."""

    # -- raw calls ---------------------------------------------------------------

    def tool_call(
        self,
        name: str,
        args: Any,
        *,
        wait: float | None = None,
        call_id: str | None = None,
        queue: str | None = None,
    ) -> str:
        """Run tool ``name`` with ``args`` (dict or JSON text); the tool-result JSON string.

        ``call_id`` names the call (for :meth:`cancel` from another thread); one is
        generated when omitted. If this thread is interrupted (``KeyboardInterrupt``)
        while waiting, the call is cancelled before the exception propagates.
        Raises :class:`~worker.errors.BrokerUnavailable` when the broker cannot be reached.
        """
        if wait is None:
            wait = call_budget(args, self.settings)
        call_id = call_id or uuid.uuid4().hex
        reroute: Callable[[], str | None] | None = None
        if queue is None and name == "process" and isinstance(args, dict):
            # A process lives on one worker: its actions go to that worker's own queue.
            process_id = args.get("process_id")
            if isinstance(process_id, str):
                queue = self.process_queue(process_id)
                reroute = functools.partial(self.process_queue, process_id)
        elif queue is None and name in SESSION_TOOLS:
            # The session lives on the worker holding its lease (none yet: the shared queue).
            queue = self._session_route()
            reroute = functools.partial(self._session_route, refresh=True)
        message = ToolCallMessage(
            call_id=call_id,
            session_id=self.session_id,
            session_token=self.session_token,
            tool=name,
            args=args,
            backend=self.backend,
            deadline_s=wait,
        )
        try:
            answer = self.sender.call(message, queue, wait, reroute)
        except KeyboardInterrupt:
            self.cancel(call_id)
            raise
        if '"session_moved": true' in answer:
            self._known_route = None  # served elsewhere from now on: ask again next time
        return answer

    def _session_route(self, *, refresh: bool = False) -> str | None:
        """The own queue of the worker serving this session (None: the shared queue).

        A known route is reused without asking the ledger: a call that reaches a worker
        no longer serving the session is handed on by it, and one sent to a worker that
        is gone is re-sent when it stays unclaimed (``refresh``). Raises
        :class:`~worker.errors.BrokerUnavailable` when the ledger is unreachable (the
        call is then not sent)."""
        if self._known_route is not None and not refresh:
            return self._known_route
        try:
            self._known_route = self.sender.leases.route(self.session_id)
            return self._known_route
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise BrokerUnavailable(
                f"cannot reach the ledger at {display_url(self.ledger_url)}: {exc}; "
                "the call was not sent"
            ) from None

    def cancel(self, call_id: str) -> None:
        """Stop call ``call_id``: a queued call never runs; a running one has its tree killed.

        The call's own result then says ``cancelled`` (exit code 130 for terminal).
        """
        self.sender.cancel(call_id)

    def result(self, call_id: str, wait: float) -> str:
        """The result JSON of tool call ``call_id`` (see :meth:`CallSender.result`)."""
        return self.sender.result(call_id, wait)

    def ask(self, task: str, args: list[Any], wait: float, queue: str | None = None) -> str | None:
        """Send ``task`` and wait up to ``wait`` seconds for its answer (None: no answer)."""
        return self.sender.ask(task, args, wait, queue)

    def ping(self, timeout: float = 10.0) -> bool:
        """True when a worker answers a no-op task within ``timeout`` seconds."""
        try:
            return self.ask(PING_TASK, [], timeout) == "pong"
        except ClientError:
            return False

    # -- approvals -------------------------------------------------------------------

    def approve(
        self, approval_id: str, scope: Literal["once", "session", "always"] = "once"
    ) -> ApprovalResult:
        """Approve a refused command of this session; then retry the call to run it."""
        return self._answer(approval_id, "approve", scope)

    def deny(self, approval_id: str) -> ApprovalResult:
        """Deny a refused command of this session."""
        return self._answer(approval_id, "deny", "once")

    def _answer(
        self,
        approval_id: str,
        action: Literal["approve", "deny"],
        scope: Literal["once", "session", "always"],
    ) -> ApprovalResult:
        message = ApprovalMessage(
            session_id=self.session_id,
            session_token=self.session_token,
            approval_id=approval_id,
            action=action,
            scope=scope,
        )
        raw = self.ask(APPROVAL_TASK, [message.model_dump()], ANSWER_SLACK_S)
        if raw is None:
            return ApprovalResult(status="error", approval_id=approval_id,
                                  error="no worker answered the approval")  # fmt: skip
        return ApprovalResult.model_validate_json(raw)

    # -- typed helpers -------------------------------------------------------------

    def exec(
        self,
        command: str,
        *,
        workdir: str | None = None,
        timeout: int | None = None,
    ) -> TerminalResult:
        """Run a foreground command; the parsed ``terminal`` result."""
        args: dict[str, Any] = {"command": command}
        if workdir is not None:
            args["workdir"] = workdir
        if timeout is not None:
            args["timeout"] = timeout
        return TerminalResult.model_validate_json(self.tool_call("terminal", args))

    def close(self) -> None:
        """Release broker connections."""
        self.sender.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
