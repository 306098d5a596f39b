"""Task names and queue names: what a message is addressed to."""

from __future__ import annotations

import os
import socket

TOOL_CALL_TASK = "sbx.tool_call"
"""One tool call (:class:`~worker.protocol.messages.ToolCallMessage`); answers tool-result JSON."""
PING_TASK = "sbx.ping"
"""No arguments; answers ``"pong"``."""
APPROVAL_TASK = "sbx.approval"
"""An answer to a refusal (:class:`~worker.protocol.messages.ApprovalMessage`)."""
RECEIPT_OP_TASK = "sbx.receipt_op"
"""A receipt or continuation operation (``process_messages.ReceiptOpMessage``)."""

SENT_AT_HEADER = "sbx_sent_at"
"""Message header: when the sender published the message (Unix time, seconds). Workers
measure queue wait with it; an older sender that sets none is simply not measured."""

SESSION_TOOLS = frozenset({"terminal", "read_file", "write_file"})
"""Tools that work in the session's sandbox: they go to the worker holding the session's
lease (its own queue), or to the shared queue when nobody holds it."""

DEFAULT_QUEUE = "sbx"
"""The shared queue every worker consumes (``SBX_QUEUE``)."""


def own_queue_name(queue: str, host: str | None = None, pid: int | None = None) -> str:
    """A worker's own queue: ``<queue>.w.<host>.<pid>`` (unique per worker process).

    Actions on that worker's background processes are sent there.
    """
    return f"{queue}.w.{host or socket.gethostname()}.{pid or os.getpid()}"


def own_queue_prefix(queue: str) -> str:
    """The prefix every worker's own queue of the shared ``queue`` starts with."""
    return f"{queue}.w."
