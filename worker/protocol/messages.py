"""Task messages that travel through the broker, and the typed results clients get back."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worker.protocol.mac import ApproverProof, CallProof


class ToolCallMessage(BaseModel):
    """One tool call as queued for a worker (the only argument of ``sbx.tool_call``)."""

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, max_length=128)
    session_id: str
    tool: str
    args: Any = None
    """The arguments: a dict, or the raw text the model sent (dispatch validates it)."""
    backend: str | None = None
    deadline_s: float | None = Field(default=None, gt=0)
    """Seconds the caller will wait; the worker answers before then."""
    handoffs: int = Field(default=0, ge=0)
    """Times a worker handed this call to the worker holding its session's lease."""
    forwarded: bool = False
    """Sent by a worker on behalf of its caller (``worker.service.forwarding``): never forwarded."""
    proof: CallProof | None = None
    """The session token's proof over this message (``worker.protocol.mac``): the token
    itself never travels."""
    stream: bool = False
    """The caller reads the call's stream in the ledger (``worker.protocol.streams``): a
    terminal command's output while it runs, or a download's bytes."""
    transfer: Literal["upload", "download"] | None = None
    """A byte transfer by the platform, not a model's tool call: ``write_file`` whose bytes
    wait in the ledger (upload), or ``read_file`` whose bytes come back on the stream."""


class TerminalResult(BaseModel):
    """A foreground ``terminal`` result (docs/tool-calls.md), or a refusal, or an error."""

    model_config = ConfigDict(extra="allow")

    output: str = ""
    exit_code: int | None = None
    error: str | None = None
    cwd: str | None = None
    truncated: bool = False
    duration_ms: int = 0
    status: str | None = None
    """``approval_required``, ``blocked`` or ``lost`` when the command did not run normally."""
    approval_id: str | None = None
    pattern_key: str | None = None
    description: str | None = None
    process_id: str | None = None
    pid: int | None = None


CallStatus = Literal["lost", "pending"]


class ApprovalMessage(BaseModel):
    """A person's answer to an ``approval_required`` result (``sbx.approval`` task).

    ``proof`` is the refused session's, ``approver`` the approver credential's
    (required to approve; a session token or an approval id alone grants nothing).
    ``call_id`` is the task id the answer is delivered to (covered by the proofs).
    """

    model_config = ConfigDict(extra="forbid")

    session_id: str
    call_id: str = Field(default="", max_length=128)
    approval_id: str = Field(min_length=1, max_length=128)
    action: Literal["approve", "deny"]
    scope: Literal["once", "session", "always"] = "once"
    proof: CallProof | None = None
    approver: ApproverProof | None = None


class ApprovalResult(BaseModel):
    """What the worker did with an :class:`ApprovalMessage`."""

    status: Literal["approved", "denied", "not_found", "forbidden", "expired", "resolved", "error"]
    approval_id: str
    scope: str | None = None
    error: str | None = None


class ToolsRequest(BaseModel):
    """A session's request for the tools to offer its model (``sbx.tools`` task)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    call_id: str = Field(default="", max_length=128)
    """The task id the answer is delivered to (covered by the proof)."""
    proof: CallProof | None = None
    toolsets: list[str] | None = None
    """Toolsets to offer (None: every toolset the worker knows)."""
    scope: dict[str, Any] = Field(default_factory=dict)
    """What each tool's ``applies(scope)`` is asked about (e.g. the assistant's settings)."""
    context_window: int | None = Field(default=None, gt=0)
    """The model's context window in tokens; given, large tool sets are deferred."""


class ToolDefinitions(BaseModel):
    """The tools to offer a model, as the worker that will run them sees them.

    ``tools`` are OpenAI function definitions (with ``tool_search``, ``tool_inspect``
    and ``tool_invoke`` when anything was deferred); ``deferred`` names the tools
    reachable only through those; ``system_prompt`` is the section that tells the
    model they exist ('' when nothing was deferred).
    """

    tools: list[dict[str, Any]] = Field(default_factory=list)
    deferred: list[str] = Field(default_factory=list)
    system_prompt: str = ""


class FileInfo(BaseModel):
    """What an upload wrote or a download read: the file's absolute path in the sandbox,
    its size in bytes and the SHA-256 of its content (hex)."""

    path: str
    size: int
    sha256: str
