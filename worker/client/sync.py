"""The synchronous client: send a session's tool calls to workers, get tool-result JSON back.

``SandboxClient.tool_call`` returns exactly what a model would see. The typed
helpers parse it into pydantic models. Both wait for the worker, and turn a
call whose worker died into a ``lost`` result instead of waiting forever.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Literal

import redis

from worker.client import files
from worker.client.approvals import ApprovalClientMixin
from worker.client.auth import ClientAuth, client_auth
from worker.client.budget import ANSWER_SLACK_S, call_budget
from worker.client.processes import ProcessClientMixin, parse_answer
from worker.protocol.credentials import InvalidSessionId, validate_session_id
from worker.protocol.errors import BrokerUnavailable, CallError, ClientError, SessionRequired
from worker.protocol.ledger import CallLedger
from worker.protocol.mac import answer_opener
from worker.protocol.messages import (
    FileInfo,
    TerminalResult,
    ToolCallMessage,
    ToolDefinitions,
    ToolsRequest,
)
from worker.protocol.tasks import PING_TASK, SESSION_TOOLS, TOOLS_TASK

if TYPE_CHECKING:
    from celery import Celery

    from worker.settings import Settings


def terminal_args(command: str, workdir: str | None, timeout: int | None) -> dict[str, Any]:
    """The arguments of a foreground ``terminal`` call."""
    args: dict[str, Any] = {"command": command}
    if workdir is not None:
        args["workdir"] = workdir
    if timeout is not None:
        args["timeout"] = timeout
    return args


class SandboxClient(ProcessClientMixin, ApprovalClientMixin):
    """Synchronous client for one session.

    ``broker_url=None`` means ``SBX_BROKER_URL``, or the embedded broker
    (started if needed). ``session_token=None`` means ``SBX_SESSION_TOKEN``, or
    a token minted from the local keyring when this machine holds one.
    ``approver_token=None`` means ``SBX_APPROVER_TOKEN``, or the credential
    minted from the local keyring (needed only to approve).
    The token never travels: each message carries a proof made with it, and
    each answer must carry the worker's seal for it (``worker.client.auth``).
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
        approver_token: str | None = None,
    ) -> None:
        # The settings (and their YAML and environment readers), the transport (Celery, the
        # broker connection, the embedded broker) load with the first client, not with
        # ``import worker.client``: importing needs only the protocol.
        from worker.broker.connection import display_url, resolve_broker_url, resolve_ledger_url
        from worker.broker.sender import CallSender
        from worker.settings import get_settings

        self.settings = settings or get_settings()
        sid = session_id or self.settings.session_id
        if not sid:
            raise SessionRequired("a session id is required (argument or SBX_SESSION_ID)")
        try:
            self.session_id = validate_session_id(sid)
        except InvalidSessionId as exc:
            raise SessionRequired(str(exc)) from None
        self.backend = backend
        self.broker_url = broker_url or resolve_broker_url(self.settings)
        # sbx's own state (claims, heartbeats, result mailboxes, routes) lives in the
        # ledger's Redis: the broker itself when it is Redis (see worker.broker.connection).
        self.ledger_url = resolve_ledger_url(self.settings, self.broker_url)
        self._ledger_shown = display_url(self.ledger_url)
        self.sender = CallSender(self.broker_url, self.ledger_url, self.settings)
        self._known_route: str | None = None
        self.app: Celery = self.sender.app
        """The Celery app messages are published with."""
        self.ledger: CallLedger = self.sender.ledger
        """The ledger answers are collected from."""
        self.auth: ClientAuth = client_auth(
            self.settings, self.session_id, session_token, self.ledger.client,
            approver=approver_token,
        )  # fmt: skip
        """Proves this client's messages and opens their answers."""

    @property
    def session_token(self) -> str:
        """This client's session token (for handing to a process that acts as the session)."""
        return self.auth.token

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
        message, queue, reroute = self._outgoing(name, args, wait, call_id, queue)
        accept = answer_opener(self.auth.token, message.call_id)
        try:
            answer = self.sender.call(message, queue, float(message.deadline_s or 0), reroute,
                                      accept=accept, sign=self._sign_call)  # fmt: skip
        except KeyboardInterrupt:
            self.cancel(message.call_id)
            raise
        return self._noted(answer)

    def tool_stream(
        self,
        name: str,
        args: Any,
        *,
        wait: float | None = None,
        call_id: str | None = None,
        transfer: Literal["upload", "download"] | None = None,
    ) -> Generator[bytes, None, str]:
        """:meth:`tool_call` that yields the pieces of the call's stream as they come -- a
        terminal command's redacted output (UTF-8 text), a download's bytes -- and returns
        the tool-result JSON. Closing the generator before the result cancels the call.
        ``transfer`` marks a platform byte transfer (``worker.client.files``)."""
        message, queue, reroute = self._outgoing(
            name, args, wait, call_id, None, stream=True, transfer=transfer
        )
        accept = answer_opener(self.auth.token, message.call_id)
        exchange = self.sender.exchange(message, queue, float(message.deadline_s or 0), reroute,
                                        accept=accept, sign=self._sign_call)  # fmt: skip
        finished = False
        try:
            result = yield from exchange
            finished = True
            return self._noted(result)
        finally:
            if not finished:  # abandoned, interrupted or failed: stop the command
                self.cancel(message.call_id)

    def _outgoing(
        self,
        name: str,
        args: Any,
        wait: float | None,
        call_id: str | None,
        queue: str | None,
        **fields: Any,
    ) -> tuple[ToolCallMessage, str | None, Callable[[], str | None] | None]:
        """The message of a call, the queue it goes to and how to find that queue again."""
        if wait is None:
            wait = call_budget(args, self.settings)
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
        message = self.call_message(name, args, call_id=call_id, wait=wait, **fields)
        return message, queue, reroute

    def _noted(self, answer: str) -> str:
        """``answer``, after noting a session that moved to another worker."""
        if '"session_moved": true' in answer:
            self._known_route = None  # served elsewhere from now on: ask again next time
        return answer

    def call_message(
        self,
        name: str,
        args: Any,
        *,
        call_id: str | None = None,
        wait: float | None = None,
        **fields: Any,
    ) -> ToolCallMessage:
        """The message of one call of tool ``name``, with this session's proof (for callers
        that publish it themselves; collect its answer with :meth:`result`). ``fields``:
        further :class:`ToolCallMessage` fields (``stream``, ``transfer``)."""
        message = ToolCallMessage(
            call_id=call_id or uuid.uuid4().hex,
            session_id=self.session_id,
            tool=name,
            args=args,
            backend=self.backend,
            deadline_s=call_budget(args, self.settings) if wait is None else wait,
            **fields,
        )
        return self._sign_call(message)

    def _sign_call(self, message: ToolCallMessage) -> ToolCallMessage:
        return self.auth.sign("call", message)[0]

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
                f"cannot reach the ledger at {self._ledger_shown}: {exc}; "
                "the call was not sent"
            ) from None

    def cancel(self, call_id: str) -> None:
        """Stop call ``call_id``: a queued call never runs; a running one has its tree killed.

        The call's own result then says ``cancelled`` (exit code 130 for terminal).
        """
        self.sender.cancel(call_id)

    def result(self, call_id: str, wait: float) -> str:
        """The result JSON of tool call ``call_id`` (see :meth:`CallSender.result`).

        Only an answer sealed by a worker for this session is returned; raises
        :class:`~worker.errors.ForgedResult` when only forged ones came.
        """
        accept = answer_opener(self.auth.token, call_id)
        return self.sender.result(call_id, wait, accept=accept)

    def ask(
        self,
        task: str,
        args: list[Any],
        wait: float,
        queue: str | None = None,
        *,
        task_id: str | None = None,
        accept: Any = None,
        abandon: Callable[[], bool] | None = None,
    ) -> str | None:
        """Send ``task`` and wait up to ``wait`` seconds for its answer (None: no answer).

        ``accept`` opens the answer (``worker.client.auth``); ``abandon`` ends the wait
        early, with None, once it answers True; see ``CallSender.ask``.
        """
        return self.sender.ask(task, args, wait, queue, task_id=task_id, accept=accept,
                               abandon=abandon)  # fmt: skip

    def ping(self, timeout: float = 10.0) -> bool:
        """True when a worker answers a no-op task within ``timeout`` seconds."""
        try:
            return self.ask(PING_TASK, [], timeout) == "pong"
        except ClientError:
            return False

    # -- typed helpers -------------------------------------------------------------

    def exec(
        self,
        command: str,
        *,
        workdir: str | None = None,
        timeout: int | None = None,
    ) -> TerminalResult:
        """Run a foreground command; the parsed ``terminal`` result."""
        args = terminal_args(command, workdir, timeout)
        return TerminalResult.model_validate_json(self.tool_call("terminal", args))

    def exec_stream(
        self,
        command: str,
        *,
        workdir: str | None = None,
        timeout: int | None = None,
        call_id: str | None = None,
    ) -> Generator[str | TerminalResult, None, None]:
        """Run a foreground command, yielding its output while it runs, the result last.

        Output comes as ``str`` pieces, redacted as the result is (a secret is never
        split across two pieces unredacted); the last item is the
        :class:`TerminalResult` that :meth:`exec` returns (its ``output`` bounded to
        head and tail as always: print the pieces or the result's output, not both).
        A reader that falls far behind gets a note of the output it missed. Leaving
        the loop early (``break``, an exception) cancels the command.
        """
        args = terminal_args(command, workdir, timeout)
        stream = self.tool_stream("terminal", args, call_id=call_id)
        try:
            while True:
                try:
                    piece = next(stream)
                except StopIteration as done:
                    yield TerminalResult.model_validate_json(done.value)
                    return
                yield piece.decode("utf-8", "replace")
        finally:
            stream.close()

    # -- files and tools ----------------------------------------------------------------

    def upload(self, path: str, data: bytes) -> FileInfo:
        """Create or replace ``path`` in this session's sandbox with ``data`` (see
        :func:`worker.client.files.upload`)."""
        return files.upload(self, path, data)

    def download(self, path: str) -> bytes:
        """The bytes of ``path`` in this session's sandbox (see
        :func:`worker.client.files.download`)."""
        return files.download(self, path)

    def tool_definitions(
        self,
        *,
        context_window: int | None = None,
        scope: dict[str, Any] | None = None,
        toolsets: list[str] | None = None,
    ) -> ToolDefinitions:
        """The tools to offer this session's model, from a worker: those of ``toolsets``
        (all when None) whose ``applies(scope)`` holds; with ``context_window`` (tokens),
        large tool sets are deferred behind ``tool_search``/``tool_inspect``/``tool_invoke``,
        which then work in this session's calls. Each request starts afresh: tools
        inspected under an earlier one must be inspected again.
        Raises :class:`~worker.errors.CallError` when no worker answers or it refuses."""
        request = ToolsRequest(
            session_id=self.session_id,
            call_id=uuid.uuid4().hex,
            toolsets=toolsets,
            scope=scope or {},
            context_window=context_window,
        )
        request, accept = self.auth.sign("tools", request)
        raw = self.ask(TOOLS_TASK, [request.model_dump(mode="json")], ANSWER_SLACK_S,
                       task_id=request.call_id, accept=accept)  # fmt: skip
        if raw is None:
            raise CallError("no worker answered: is an `sbx worker` running?", "pending")
        return ToolDefinitions.model_validate(parse_answer(raw, CallError))

    def close(self) -> None:
        """Release broker connections."""
        self.sender.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
