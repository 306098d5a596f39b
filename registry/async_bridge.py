"""Running a tool's coroutine to completion from the registry's synchronous dispatch.

Three cases: no loop running in this thread -> one persistent loop (main thread),
so async clients cached by tools stay bound to a live loop; called from inside a
running loop -> a disposable thread runs ``asyncio.run`` (blocking the caller's
loop is the price of a synchronous dispatch; re-entering the running loop would
deadlock); other threads -> one persistent loop per thread (loops are not
thread-safe).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

_main_loop: asyncio.AbstractEventLoop | None = None
_main_loop_lock = threading.Lock()
_thread_loops = threading.local()


def _persistent_loop() -> asyncio.AbstractEventLoop:
    """The calling thread's persistent loop (created on first use, recreated if closed)."""
    global _main_loop
    if threading.current_thread() is threading.main_thread():
        with _main_loop_lock:
            if _main_loop is None or _main_loop.is_closed():
                _main_loop = asyncio.new_event_loop()
            return _main_loop
    loop: asyncio.AbstractEventLoop | None = getattr(_thread_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _thread_loops.loop = loop
    return loop


async def _await(awaitable: Any) -> Any:
    return await awaitable


def run_async(awaitable: Any) -> Any:
    """Run ``awaitable`` to completion from synchronous code, whatever the thread's state."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _persistent_loop().run_until_complete(_await(awaitable))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sbx-async") as pool:
        return pool.submit(asyncio.run, _await(awaitable)).result()
