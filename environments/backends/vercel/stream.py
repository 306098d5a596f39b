"""Where the session shell's two byte paths go: its stdin through :mod:`.wire` and its
stdout log stream through :mod:`.logfeed` when the API has a direct address, else
both through the SDK.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from . import wire
from .http11 import Endpoint, endpoint_for
from .sdk import SDK_VERSION, Process, VercelApi, resolve_credentials


class StdinSink(Protocol):
    """Ordered writes to the shell's stdin that never wait for the service."""

    def write(self, data: bytes) -> None:
        """Send ``data`` after what was written before; ``BrokenPipeError`` once the
        shell's stdin takes no more input."""

    def close(self) -> None:
        """Stop writing (the process's stdin itself stays open)."""


def endpoint(api: VercelApi) -> Endpoint | None:
    """Where :mod:`.wire` and :mod:`.logfeed` reach the API of ``api`` (``None``: through
    the SDK only)."""
    creds = resolve_credentials(api.config)
    return endpoint_for(
        api.base_url(),
        creds.token,
        creds.team_id,
        user_agent=f"sbx (vercel-sandbox {SDK_VERSION})",
        connect_timeout=api.config.connect_timeout,
        request_timeout=api.config.request_timeout,
    )


def stdin_sink(
    api: VercelApi, process: Process, direct: Endpoint | None, on_broken: Callable[[], None]
) -> StdinSink:
    """The writer of ``process``'s stdin (at ``direct``, else through the SDK);
    ``on_broken`` runs once when it stops taking input."""
    if direct is None:
        return SdkStdinWriter(api, process, on_broken)
    return wire.StdinWriter(direct, process.session_id, process.id, on_broken)


class SdkStdinWriter:
    """Writes through the SDK's stdin (one request each), in order, from a thread of its own:
    the command starts running while its request's answer is still on the way."""

    def __init__(self, api: VercelApi, process: Process, on_broken: Callable[[], None]) -> None:
        self._api = api
        self._process = process
        self._on_broken = on_broken
        self._broken = False
        self._writes: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="sbx-vercel-in", daemon=True).start()

    def write(self, data: bytes) -> None:
        if self._broken:
            raise BrokenPipeError("the shell's stdin no longer takes input")
        self._writes.put(data)

    def close(self) -> None:
        self._writes.put(None)

    def _run(self) -> None:
        while (data := self._writes.get()) is not None:
            try:
                self._api.write_stdin(self._process, data)
            except BrokenPipeError:
                # Nothing of this input ran: the reader sees the end of the stream,
                # which SessionShell handles as a dead shell.
                self._broken = True
                self._on_broken()
                return
