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
  no colours), and ``cat`` copies it to the terminal;
* only the session shell writes to the terminal: the leader's and the PTY shell's own
  stderr go to ``/dev/null``. When a command kills the session shell, what they would
  print ("Killed", "logout") is not taken for the next command's output, so the stream
  just ends and that command runs on a new shell.

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

from environments.shell.framing import shell_quote
from environments.shell.queued import ClosesOnce, QueuedOutput
from environments.shell.script import start_script

# The session shell's first line (environments.shell.script.start_script prints it). The
# echo of the typed line shows `$$`, never digits, so it cannot match.
_PID_LINE = re.compile(rb"sbx-shell-pid (\d+)\r?$")


def launch_line(shell: str) -> bytes:
    """The line typed into the PTY shell (see the module docstring)."""
    # The new session's leader is an sh that waits for the session shell: bash with job
    # control opens its stdin's terminal, which would make that terminal the controlling
    # one of a session it leads, and then every command's subshell (a background process
    # group) that reads its line from it would be stopped by SIGTTIN.
    # The session shell points its own stderr at the pipe; the leader's 2>/dev/null on it
    # is where sh reports a session shell killed by a signal ("Killed").
    session = shell_quote("exec 2>&1; " + start_script(shell))
    leader = shell_quote(f"sh -c {session} 2>/dev/null; exit")
    return (
        " stty raw -echo 2>/dev/null; set +m; S=; command -v setsid >/dev/null 2>&1 && S=setsid;"
        f" $S sh -c {leader} 2>/dev/null | cat; exec 2>/dev/null; exit\n"
    ).encode()


_MAX_PREAMBLE = 1 << 16


class PtyStream(Protocol):
    """What the channel needs of the SDK's PTY handle."""

    def __iter__(self) -> object: ...

    def send_input(self, data: bytes) -> None: ...

    def disconnect(self) -> None: ...


class PtyChannel(QueuedOutput, ClosesOnce):
    """:class:`~environments.shell.channel.Channel` over a PTY websocket.

    A reader thread drains the websocket into the channel's queue at all times
    (the daemon drops a client that falls behind); ``on_close`` runs once in
    :meth:`close`.
    """

    def __init__(self, handle: PtyStream, on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.on_close = on_close
        self._handle = handle
        self._ended = threading.Event()
        threading.Thread(target=self._pump, name="sbx-daytona-pty", daemon=True).start()

    def _pump(self) -> None:
        try:
            for data in self._handle:  # type: ignore[attr-defined]
                if data:
                    self.put(bytes(data))
        except Exception:  # a dropped connection ends the stream like EOF
            pass
        self._ended.set()
        self.put(b"")

    def write(self, data: bytes) -> None:
        if self._closed or self.eof or self._ended.is_set():
            raise BrokenPipeError("the sandbox's terminal is closed")
        try:
            self._handle.send_input(data)
        except Exception as exc:
            raise BrokenPipeError(f"the sandbox's terminal is closed: {exc}") from None

    def read_pid(self, timeout: float) -> tuple[int | None, bytes]:
        """The session shell's pid from its first line (``None`` if it did not come within
        ``timeout``), and the tail of what came before it (for an error message)."""
        deadline = time.monotonic() + timeout
        before = b""
        while (left := deadline - time.monotonic()) > 0 and not self.eof:
            line = self.read_line(left)
            match = _PID_LINE.search(line)
            if match:
                return int(match.group(1)), before[-300:]
            before = (before + line + b"\n")[-_MAX_PREAMBLE:]
        return None, before[-300:]

    @property
    def peer_gone(self) -> bool:
        """True once the terminal's stream ended (the shell exited, the sandbox stopped)."""
        return self._closed or self.eof or self._ended.is_set()

    def close(self) -> None:
        """Run ``on_close``, then drop the websocket. Idempotent."""
        if self._close_once():
            with contextlib.suppress(Exception):
                self._handle.disconnect()
