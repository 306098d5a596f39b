"""Observers of answered calls (the worker's metrics): told by the task layer, never in its way.

:func:`notify_answered` is called once per answer this worker delivers (tool
calls, approvals, pings) with the answer's JSON, and with ``None`` for a call
handed to the worker serving its session. An observer that raises is logged
and ignored; with no observer the call costs one empty loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

AnswerObserver = Callable[[str, str | None], None]
"""``observer(call_id, answer)``; ``answer`` None: handed to another worker."""

_observers: list[AnswerObserver] = []


def add_answer_observer(observer: AnswerObserver) -> None:
    """Tell ``observer`` about every answer from now on."""
    _observers.append(observer)


def notify_answered(call_id: str, answer: str | None) -> None:
    """Tell the observers that ``call_id`` was answered with ``answer`` (or handed off)."""
    for observer in _observers:
        try:
            observer(call_id, answer)
        except Exception:
            log.warning("an answer observer failed", exc_info=True)
