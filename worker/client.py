"""Clients for platforms: send tool calls to workers, get tool-result JSON back.

``SandboxClient.tool_call`` returns exactly what a model would see. The typed
helpers parse it into pydantic models. Both wait for the worker, and turn a
call whose worker died into a ``lost`` result instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Literal

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from process_registry.sessions import load_or_create_secret, validate_session_id
from registry.results import tool_error

from .app import APPROVAL_TASK, PING_TASK, TOOL_CALL_TASK, create_app
from .connection import display_url, redis_client, resolve_broker_url, resolve_ledger_url
from .liveness import CallLedger
from .messages import ApprovalMessage, ApprovalResult, TerminalResult, ToolCallMessage
from .process_client import AsyncProcessClientMixin, ProcessClientMixin
from .reaper import declare_lost
from .services import load_signer
from .settings import Settings, get_settings

# How often a waiting client checks that the call's worker is alive.
_LIVENESS_POLL_S = 1.0
# Extra time a client waits beyond the command's own timeout.
_ANSWER_SLACK_S = 30.0
# Reconnection backoff while the broker is unreachable.
_RECONNECT_FIRST_S = 0.05
_RECONNECT_MAX_S = 1.0


class ClientError(RuntimeError):
    """The client could not be set up (no session, no token, no broker)."""


class BrokerUnavailable(ClientError):
    """The broker could not be reached: the message says whether the call was sent."""


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
    raise ClientError(
        "no session token: set SBX_SESSION_TOKEN (from `sbx session token SESSION_ID` "
        "on a machine holding the secret key)"
    )


class SandboxClient(ProcessClientMixin):
    """Synchronous client for one session.

    ``broker_url=None`` means ``SBX_BROKER_URL``, or the embedded broker
    (started if needed). ``session_token=None`` means ``SBX_SESSION_TOKEN``, or
    a token minted from the local secret key when this machine holds it.
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
            raise ClientError("a session id is required (argument or SBX_SESSION_ID)")
        self.session_id = validate_session_id(sid)
        self.session_token = _resolve_token(self.settings, self.session_id, session_token)
        self.backend = backend
        self.broker_url = broker_url or resolve_broker_url(self.settings)
        # sbx's own state (claims, heartbeats, result mailboxes, routes) lives in the
        # ledger's Redis: the broker itself when it is Redis (see worker.connection).
        self.ledger_url = resolve_ledger_url(self.settings, self.broker_url)
        self.app: Celery = create_app(self.broker_url, self.settings)
        self.ledger = CallLedger(
            redis_client(self.ledger_url),
            claim_ttl=self.settings.claim_ttl,
            lost_after=self.settings.lost_after,
        )

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
        """
        if wait is None:
            wait = _call_budget(args, self.settings)
        call_id = call_id or uuid.uuid4().hex
        if queue is None and name == "process" and isinstance(args, dict):
            # A process lives on one worker: its actions go to that worker's own queue.
            process_id = args.get("process_id")
            queue = self.process_queue(process_id) if isinstance(process_id, str) else None
        message = ToolCallMessage(
            call_id=call_id,
            session_id=self.session_id,
            session_token=self.session_token,
            tool=name,
            args=args,
            backend=self.backend,
            deadline_s=wait,
        )
        self.send_call(message, queue)
        try:
            return self.result(call_id, wait)
        except KeyboardInterrupt:
            self.cancel(call_id)
            raise

    def cancel(self, call_id: str) -> None:
        """Stop call ``call_id``: a queued call never runs; a running one has its tree killed.

        The call's own result then says ``cancelled`` (exit code 130 for terminal).
        """
        self.ledger.request_cancel(call_id)

    def _send(self, task: str, args: list[Any], task_id: str, queue: str | None) -> None:
        """Publish one task message; :class:`BrokerUnavailable` if the broker is down.

        Every sbx task answers through the ledger's mailbox under ``task_id``,
        never through Celery's result backend (see docs/architecture.md).
        """
        try:
            self.app.send_task(
                task,
                args=args,
                task_id=task_id,
                queue=queue or self.settings.queue,
                ignore_result=True,
                # Celery would otherwise copy a repr of the arguments (commands, tokens)
                # into the message headers: work per call, and a second copy of secrets.
                argsrepr="",
                kwargsrepr="",
            )
        except (OperationalError, redis.RedisError) as exc:
            raise BrokerUnavailable(
                f"cannot reach the broker at {display_url(self.broker_url)}: {exc}; "
                "the call was not sent"
            ) from None

    def send_call(self, message: ToolCallMessage, queue: str | None = None) -> None:
        """Queue an already built call message (``queue``: the shared queue when None);
        :meth:`wait_answer` or :meth:`result` then collects it by ``message.call_id``."""
        self._send(TOOL_CALL_TASK, [message.model_dump(mode="json")], message.call_id, queue)

    def wait_answer(self, call_id: str, wait: float, *, claimed: bool) -> str | None:
        """The answer of ``call_id`` within ``wait`` seconds, else None.

        ``claimed`` calls (tool calls) whose worker died answer ``lost``, and
        ``{"status": "collected"}`` when their result was taken before. A broker
        that goes away is waited for until the deadline (a worker holds a
        finished call's result until it can deliver it), then :class:`BrokerUnavailable`.
        """
        deadline = time.monotonic() + wait
        backoff = _RECONNECT_FIRST_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                value = self.ledger.take_result(
                    call_id, min(_LIVENESS_POLL_S, max(0.0, remaining))
                )
                if value is not None:
                    return value
                if claimed and self.ledger.is_lost(call_id):
                    declare_lost(self.ledger, call_id, None)
                    continue
                if claimed and self.ledger.collected(call_id):
                    return tool_error(
                        f"the result of call {call_id} was already collected; "
                        "a result is handed out once",
                        status="collected",
                        call_id=call_id,
                    )
                backoff = _RECONNECT_FIRST_S
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() >= deadline:
                    raise BrokerUnavailable(
                        f"lost the connection to {display_url(self.ledger_url)} while waiting for "
                        f"call {call_id}: {exc}; the call may have run: collect its result "
                        "with result(call_id, wait) once the broker is back"
                    ) from None
                # Retry backoff, not synchronisation: nothing to wait on while it is down.
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, _RECONNECT_MAX_S)
                continue
            if time.monotonic() >= deadline:
                return None

    def _ask(self, task: str, args: list[Any], wait: float, queue: str | None = None) -> str | None:
        """Send ``task`` and wait up to ``wait`` seconds for its answer (None: no answer)."""
        task_id = uuid.uuid4().hex
        self._send(task, args, task_id, queue)
        return self.wait_answer(task_id, wait, claimed=False)

    def result(self, call_id: str, wait: float) -> str:
        """The result JSON of tool call ``call_id``, waiting up to ``wait`` seconds.

        Answers ``{"status": "lost"}`` when the call's worker died,
        ``{"status": "pending", "call_id": ...}`` when nothing came in time (call
        again with the same id to keep waiting), and ``{"status": "collected"}``
        when its result was handed out before: a result is handed out once.
        A broker that goes away while waiting is waited for; :class:`BrokerUnavailable`
        if it is still gone at the deadline.
        """
        value = self.wait_answer(call_id, wait, claimed=True)
        if value is not None:
            return value
        return json.dumps(
            {
                "status": "pending",
                "error": f"no result within {wait:g}s: is an `sbx worker` running "
                f"for queue {self.settings.queue!r}? (call id {call_id})",
                "call_id": call_id,
            }
        )

    def ping(self, timeout: float = 10.0) -> bool:
        """True when a worker answers a no-op task within ``timeout`` seconds."""
        try:
            return self._ask(PING_TASK, [], timeout) == "pong"
        except BrokerUnavailable:
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
        raw = self._ask(APPROVAL_TASK, [message.model_dump()], _ANSWER_SLACK_S)
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
        self.ledger.client.close()
        self.app.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _call_budget(args: Any, settings: Settings) -> float:
    """How long to wait for a call: its own timeout (if any) plus slack."""
    timeout = settings.default_timeout
    if isinstance(args, dict) and isinstance(args.get("timeout"), int):
        timeout = min(max(1, args["timeout"]), settings.max_timeout)
    return float(timeout) + _ANSWER_SLACK_S


class AsyncSandboxClient(AsyncProcessClientMixin):
    """``asyncio`` face of :class:`SandboxClient`; the same arguments and results."""

    def __init__(
        self,
        broker_url: str | None = None,
        session_id: str | None = None,
        session_token: str | None = None,
        *,
        backend: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self._sync = SandboxClient(
            broker_url, session_id, session_token, backend=backend, settings=settings
        )
        self.session_id = self._sync.session_id

    async def tool_call(self, name: str, args: Any, *, wait: float | None = None) -> str:
        """As :meth:`SandboxClient.tool_call`; cancelling the awaiting task cancels the call."""
        call_id = uuid.uuid4().hex
        try:
            return await asyncio.to_thread(
                self._sync.tool_call, name, args, wait=wait, call_id=call_id
            )
        except asyncio.CancelledError:
            await asyncio.to_thread(self._sync.cancel, call_id)
            raise

    async def result(self, call_id: str, wait: float) -> str:
        """As :meth:`SandboxClient.result`."""
        return await asyncio.to_thread(self._sync.result, call_id, wait)

    async def exec(
        self, command: str, *, workdir: str | None = None, timeout: int | None = None
    ) -> TerminalResult:
        return await asyncio.to_thread(self._sync.exec, command, workdir=workdir, timeout=timeout)

    async def approve(
        self, approval_id: str, scope: Literal["once", "session", "always"] = "once"
    ) -> ApprovalResult:
        return await asyncio.to_thread(self._sync.approve, approval_id, scope)

    async def deny(self, approval_id: str) -> ApprovalResult:
        return await asyncio.to_thread(self._sync.deny, approval_id)

    async def ping(self, timeout: float = 10.0) -> bool:
        return await asyncio.to_thread(self._sync.ping, timeout)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
