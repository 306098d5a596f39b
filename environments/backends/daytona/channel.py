"""The session shell's byte stream: a Daytona PTY session's websocket.

The PTY's own shell is interactive (``$SHELL -i -l``, the terminal its
controlling tty). :func:`launch_line` is the one line sbx types into it; it
turns the terminal into a plain byte pipe and starts the session shell:

* ``stty raw -echo``: no echo, no CR/LF translation, no signal characters, no
  line-length limit -- every byte sbx sends reaches the session shell as is;
* ``set +m`` then ``setsid``: the session shell leads a new session *without* a
  controlling terminal (with job control off, setsid need not fork, so it stays
  a child of the PTY shell and dies with the PTY session); a command that opens
  ``/dev/tty`` (a password prompt) fails instead of reading the control stream;
* ``2>&1 | cat``: commands write to a pipe, as in the docker backend (no pagers,
  no colours), and ``cat`` copies it to the terminal.

The session shell prints ``sbx-shell-pid <pid>`` first; everything before that
line is the PTY shell's prompt and echo and is discarded.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable
from typing import Protocol

from environments.shell.queued import QueuedChannel

_SHELLS = {
    "sh": "exec sh -s",
    "bash": "exec bash --noprofile --norc -s",
    "auto": "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc -s; exec sh -s",
}
# The pid line, as the session shell prints it; the typed line reads `"sbx-shell-""pid $$"`
# and never matches.
_PID_LINE = re.compile(rb"sbx-shell-pid (\d+)\r?\n")
_MAX_PREAMBLE = 1 << 20


def launch_line(shell: str) -> bytes:
    """The line typed into the PTY shell (see the module docstring)."""
    inner = 'echo "sbx-shell-""pid $$"; ' + _SHELLS[shell]
    quoted = "'" + inner.replace("'", "'\\''") + "'"
    return (
        " stty raw -echo 2>/dev/null; set +m; S=; command -v setsid >/dev/null 2>&1 && S=setsid;"
        f" $S sh -c {quoted} 2>&1 | cat; exit\n"
    ).encode()


class PtyStream(Protocol):
    """What the channel needs of the SDK's PTY handle."""

    def __iter__(self) -> object: ...

    def send_input(self, data: bytes) -> None: ...

    def disconnect(self) -> None: ...


class PtyChannel(QueuedChannel):
    """:class:`~environments.shell.driver.Channel` over a PTY websocket.

    A reader thread drains the websocket into the channel's queue at all times
    (the daemon drops a client that falls behind).
    """

    def __init__(self, handle: PtyStream, on_close: Callable[[], None] | None = None) -> None:
        super().__init__(on_close)
        self._handle = handle
        self._ended = threading.Event()
        threading.Thread(target=self._pump, name="sbx-daytona-pty", daemon=True).start()

    def _pump(self) -> None:
        try:
            for data in self._handle:  # type: ignore[attr-defined]
                self.feed(bytes(data))
        except Exception:  # a dropped connection ends the stream like EOF
            pass
        self._ended.set()
        self.feed_end()

    def write(self, data: bytes) -> None:
        if self._closed or self._eof or self._ended.is_set():
            raise BrokenPipeError("the sandbox's terminal is closed")
        try:
            self._handle.send_input(data)
        except Exception as exc:
            raise BrokenPipeError(f"the sandbox's terminal is closed: {exc}") from None

    def read_pid(self, timeout: float) -> tuple[int | None, bytes]:
        """The session shell's pid from its first line (``None`` if it did not come within
        ``timeout``), and the tail of what came before it (for an error message)."""
        deadline = time.monotonic() + timeout
        seen = b""
        while True:
            match = _PID_LINE.search(seen)
            if match:
                self.unread(seen[match.end() :])
                return int(match.group(1)), seen[: match.start()][-300:]
            chunk = self.read(max(0.0, deadline - time.monotonic()))
            if not chunk:
                return None, seen[-300:]
            seen = (seen + chunk)[-_MAX_PREAMBLE:]

    @property
    def peer_gone(self) -> bool:
        """True once the terminal's stream ended (the shell exited, the sandbox stopped)."""
        return self._closed or self._eof or self._ended.is_set()

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._handle.disconnect()
