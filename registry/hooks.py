"""Plugin hooks around a tool call: ``pre_tool_call`` (may block) and ``post_tool_call``.

A ``pre_tool_call`` hook is called as ``hook(name=..., args=..., task_id=...,
user_task=...)``. It allows the call by returning ``None``/``False``; it blocks it
by returning a reason string or a mapping ``{"block": True, "reason": "..."}``.
A pre hook that raises blocks the call too: a guard that crashed cannot vouch for
the call (fail closed).

A ``post_tool_call`` hook is called with the same keywords plus ``result`` (the
JSON string). Post hooks observe; their return value is ignored and an exception
is logged, never surfaced, because the tool has already run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Hook = Callable[..., Any]
HOOK_EVENTS = ("pre_tool_call", "post_tool_call")


class HookRegistry:
    """Hooks by event name, called in registration order."""

    def __init__(self) -> None:
        self._hooks: dict[str, list[Hook]] = {event: [] for event in HOOK_EVENTS}
        self._lock = threading.Lock()

    def register_hook(self, event: str, hook: Hook) -> None:
        """Add ``hook`` for ``event`` (one of :data:`HOOK_EVENTS`)."""
        if event not in self._hooks:
            raise ValueError(f"unknown hook event {event!r}; expected one of {HOOK_EVENTS}")
        with self._lock:
            self._hooks[event] = [*self._hooks[event], hook]  # copy-on-write: lock-free reads

    def unregister_hook(self, event: str, hook: Hook) -> None:
        """Remove ``hook`` from ``event`` if present."""
        with self._lock:
            self._hooks[event] = [h for h in self._hooks.get(event, []) if h is not hook]

    def has(self, event: str) -> bool:
        """Whether any hook is registered for ``event`` (lets dispatch skip the work)."""
        return bool(self._hooks.get(event))

    def run_pre(self, **kwargs: Any) -> str | None:
        """The block reason of the first blocking ``pre_tool_call`` hook, or ``None``."""
        for hook in self._hooks["pre_tool_call"]:
            try:
                verdict = hook(**kwargs)
            except Exception as exc:
                log.warning("pre_tool_call hook %r raised %s; blocking", hook, exc)
                return f"pre_tool_call hook failed: {type(exc).__name__}: {exc}"
            reason = _block_reason(verdict)
            if reason is not None:
                return reason
        return None

    def run_post(self, **kwargs: Any) -> None:
        """Call every ``post_tool_call`` hook; failures are logged only."""
        for hook in self._hooks["post_tool_call"]:
            try:
                hook(**kwargs)
            except Exception as exc:
                log.warning("post_tool_call hook %r raised %s", hook, exc)


def _block_reason(verdict: Any) -> str | None:
    if verdict is None or verdict is False:
        return None
    if isinstance(verdict, str):
        return verdict or "blocked by pre_tool_call hook"
    if isinstance(verdict, Mapping):
        if verdict.get("block"):
            return str(verdict.get("reason") or "blocked by pre_tool_call hook")
        return None
    if verdict is True:
        return "blocked by pre_tool_call hook"
    return None


hooks = HookRegistry()
"""The process-wide hooks plugins register into."""


def register_hook(event: str, hook: Hook) -> None:
    """Register ``hook`` into the process-wide :data:`hooks`."""
    hooks.register_hook(event, hook)
