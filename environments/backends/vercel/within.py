"""A blocking call given up after a time: the sync SDK's streams have no timeout of their
own, so a stalled one would hold its caller for good."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def within(call: Callable[[], T], seconds: float) -> T:
    """``call()`` on a thread of its own, its result or its exception; ``TimeoutError``
    when it has not returned after ``seconds`` (it is left to finish by itself)."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    worker = threading.Thread(target=run, name="sbx-vercel-helper", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise TimeoutError(f"no answer within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(T, value)
