"""A word on stderr while a CLI call waits for a worker that has not taken it.

A call sent while no worker runs waits in its queue for one (that is how calls ride
out a worker's restart), up to its whole deadline: minutes of silence for a person
at a terminal who merely forgot to start ``sbx worker``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

NOTICE_AFTER_S = 5.0
"""How long a CLI call may stay untaken before the notice (a worker takes one in
milliseconds; a restarting one in a few seconds)."""


@contextlib.contextmanager
def untaken_notice(
    client: Any, call_id: str, *, after: float = NOTICE_AFTER_S, stream: TextIO | None = None
) -> Iterator[None]:
    """While the body runs: once, ``after`` seconds in, say on ``stream`` (stderr) that
    no worker has taken call ``call_id`` of ``client`` yet, when none has. The call goes
    on waiting as before; a ledger that cannot be asked means no notice."""
    out = sys.stderr if stream is None else stream
    done = threading.Event()

    def check() -> None:
        import redis  # loaded only by a call that waits this long

        if done.wait(after):
            return
        try:
            taken = client.sender.ledger.claimed(call_id)
        except (redis.RedisError, OSError):
            return
        if not taken and not done.is_set():
            out.write(
                f"sbx: no worker has taken the call after {after:g}s; it waits in queue "
                f"{client.settings.queue!r} until one does or its deadline passes "
                "(is an `sbx worker` running on this broker?)\n"
            )
            out.flush()

    watcher = threading.Thread(target=check, name="sbx-untaken-notice", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
