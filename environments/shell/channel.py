"""The byte stream a session shell is driven over, whatever carries it.

Local pipes, a docker attach socket, an SSH channel, an SDK process stream: each
backend gives :class:`~environments.shell.driver.SessionShell` a :class:`Channel`
and, where it can signal inside the sandbox, a :data:`GroupKiller`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Channel(Protocol):
    """A bidirectional byte stream to a shell's stdin and (merged) stdout."""

    def write(self, data: bytes) -> None:
        """Send ``data`` to the shell's stdin; raise ``OSError`` if the stream is gone."""

    def read(self, timeout: float | None) -> bytes | None:
        """Next chunk of output; ``None`` when ``timeout`` seconds pass; ``b""`` at EOF."""

    def close(self) -> None:
        """Terminate the shell and release the stream. Idempotent."""


GroupKiller = Callable[[int, int], None]
"""``kill_group(pgid, signum)``: deliver ``signum`` to a process group in the sandbox."""
