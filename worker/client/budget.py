"""How long a client waits for a worker's answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.settings import Settings

ANSWER_SLACK_S = 30.0
"""Extra seconds a client waits beyond what the call itself may take."""


def call_budget(args: Any, settings: Settings) -> float:
    """How long to wait for a call: its own timeout (if any) plus slack."""
    timeout = settings.default_timeout
    if isinstance(args, dict) and isinstance(args.get("timeout"), int):
        timeout = min(max(1, args["timeout"]), settings.max_timeout)
    return float(timeout) + ANSWER_SLACK_S
