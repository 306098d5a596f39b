"""What a platform imports to send tool calls to sbx workers and read the answers.

``from worker.client import SandboxClient`` (or :class:`AsyncSandboxClient`).
Importing this package loads the wire protocol, settings, session tokens and
errors -- never the worker side, the approval engine, the process table or a
backend -- and registers no tool.
"""

from worker.client.aio import AsyncSandboxClient
from worker.client.sync import SandboxClient
from worker.errors import BrokerUnavailable, CallError, ClientError, FileError, ProcessError
from worker.protocol.messages import ApprovalResult, FileInfo, TerminalResult, ToolDefinitions
from worker.protocol.process_messages import (
    Continuation,
    ProcessLog,
    ProcessStarted,
    ProcessStatus,
    ProcessWrite,
    Receipt,
)

__all__ = [
    "ApprovalResult",
    "AsyncSandboxClient",
    "BrokerUnavailable",
    "CallError",
    "ClientError",
    "Continuation",
    "FileError",
    "FileInfo",
    "ProcessError",
    "ProcessLog",
    "ProcessStarted",
    "ProcessStatus",
    "ProcessWrite",
    "Receipt",
    "SandboxClient",
    "TerminalResult",
    "ToolDefinitions",
]
