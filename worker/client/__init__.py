"""What a platform imports to send tool calls to sbx workers and read the answers.

``from worker.client import SandboxClient`` (or :class:`AsyncSandboxClient`).
Importing this package loads the client and the wire protocol
(:mod:`worker.protocol`: messages, errors, credential formats) and nothing else of
sbx but the two leaves the protocol stands on (the error root and the credential
format, shared with the worker); it registers no tool. Settings, the transport and
key handling load with the first client that needs them.
"""

from typing import TYPE_CHECKING, Any

from worker.client.sync import SandboxClient
from worker.protocol.errors import (
    BrokerUnavailable,
    CallError,
    ClientError,
    FileError,
    ProcessError,
)
from worker.protocol.messages import ApprovalResult, FileInfo, TerminalResult, ToolDefinitions
from worker.protocol.process_messages import (
    Continuation,
    ProcessLog,
    ProcessStarted,
    ProcessStatus,
    ProcessWrite,
    Receipt,
)

if TYPE_CHECKING:
    from worker.client.aio import AsyncSandboxClient

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


def __getattr__(name: str) -> Any:
    # The asyncio client loads with its first use: a platform on threads never needs it.
    if name == "AsyncSandboxClient":
        from worker.client.aio import AsyncSandboxClient

        return AsyncSandboxClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
