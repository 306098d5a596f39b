"""What a tool handler may use while it runs: the caller's identity and the worker's components."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from environments.pool import SandboxPool


class Cancellation(threading.Event):
    """A call's cancel event that also says who cancelled it."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "the caller"

    def cancel(self, reason: str) -> None:
        """Cancel with ``reason`` (e.g. "the worker shutting down"); the first reason stays."""
        if not self.is_set():
            self.reason = reason
        self.set()


@dataclass(slots=True)
class ToolContext:
    """Per-call context handed to every handler.

    ``session_id`` is verified by the worker before dispatch. ``deadline`` is a
    ``time.monotonic()`` instant after which the call must have returned.
    ``components`` carries optional collaborators by name (the approval guard,
    the process manager) so that tools can use them without ``registry``
    importing ``worker``.
    """

    session_id: str
    call_id: str
    backend: str
    pool: SandboxPool
    deadline: float = field(default_factory=lambda: time.monotonic() + 3600.0)
    output_limit: int = 100_000
    redact_output: bool = True
    default_timeout: int = 180
    max_timeout: int = 3600
    components: dict[str, Any] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set when the caller cancels the call; long-running tools stop and report it."""
    forwarded: bool = False
    """The call was forwarded by another worker: answer it here, never forward it again."""
    on_output: Callable[[bytes], None] | None = None
    """Set when the caller streams the call: tools that run a command hand it their output
    as it arrives (``terminal`` does); the result still carries the output as always."""

    def remaining(self) -> float:
        """Seconds left before the call's deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())
