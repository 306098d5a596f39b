"""The session shell's byte stream over the Vercel Sandbox API.

The shell is one SDK process (``sh`` with stdin piped). Input goes out as stdin
requests (:mod:`.wire`: one per command, sent from the caller's thread, its
answer read by another); output comes back on the process's NDJSON log stream,
read by the caller's thread (:mod:`.logfeed`) with the read's timeout.

The service's log records carry *text*, so bytes that are not UTF-8 would not
survive. :data:`LAUNCH` therefore pipes the shell's output through a base64 line
encoder inside the sandbox (``python3``, else ``node``); only when neither exists
does the stream go plain (invalid UTF-8 then arrives as U+FFFD). The first line of
the stream names the mode: ``sbx-stream MODE``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import threading
import time
from collections.abc import Callable

from environments.shell.framing import read_line
from environments.shell.queued import ClosesOnce, QueuedOutput

from .logfeed import LogFeed, StreamBroken
from .sdk import Process, VercelApi
from .stream import endpoint, stdin_sink

LAUNCH = r"""
enc=$1; shell=$2
if [ "$enc" = auto ]; then
  enc=none
  if command -v python3 >/dev/null 2>&1; then enc=python3
  elif command -v node >/dev/null 2>&1; then enc=node; fi
fi
echo "sbx-stream $enc"
inner='echo "sbx-shell-pid $$"; '"$shell"
case $enc in
  python3) sh -c "$inner" 2>/dev/null | python3 -u -c "$3" ;;
  node) sh -c "$inner" 2>/dev/null | node -e "$4" ;;
  *) exec sh -c "$inner" 2>/dev/null ;;
esac
"""
"""Args: ``ENCODER SHELL-COMMAND PYTHON-ENCODER NODE-ENCODER``."""

PY_ENCODER = (
    "import os,base64\n"
    "while 1:\n"
    " b=os.read(0,65536)\n"
    " if not b:break\n"
    " os.write(1,base64.b64encode(b)+b'\\n')\n"
)
NODE_ENCODER = "process.stdin.on('data',b=>process.stdout.write(b.toString('base64')+'\\n'))"
SHELLS = {
    "sh": "exec sh -s",
    "bash": "exec bash --noprofile --norc -s",
    "auto": "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc -s; exec sh -s",
}


def launch_args(encoder: str, shell: str) -> list[str]:
    """``sh`` arguments that start the session shell behind the stream encoder."""
    return ["-c", LAUNCH, "sbx-shell", encoder, SHELLS[shell], PY_ENCODER, NODE_ENCODER]


class StreamDecoder:
    """Text chunks of the log stream -> the shell's bytes (see the module docstring)."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self._text = ""

    def feed(self, text: str) -> bytes:
        self._text += text
        if self.mode is None:
            head, sep, rest = self._text.partition("\n")
            if not sep:
                return b""
            self.mode = head.removeprefix("sbx-stream ").strip()
            self._text = rest
        if self.mode not in ("python3", "node"):
            data, self._text = self._text.encode("utf-8", "surrogateescape"), ""
            return data
        *lines, self._text = self._text.split("\n")
        out = bytearray()
        for line in lines:
            with contextlib.suppress(binascii.Error, ValueError):
                out += base64.b64decode(line)
        return bytes(out)


class VercelShellChannel(ClosesOnce):
    """:class:`~environments.shell.channel.Channel` over the shell's SDK process.

    Output is read on the reading thread itself (:class:`.logfeed.LogFeed`) when the API
    has a direct address; when that stream breaks, or without a direct address, the
    SDK's reader replays the log on a pump thread of its own (what was delivered
    already is skipped). ``on_close`` runs once in :meth:`close`, before the shell's
    stdin is closed and the process killed (the environment kills the tree of a shell
    whose stream is still open there)."""

    def __init__(self, api: VercelApi, process: Process) -> None:
        self._api = api
        self.process = process
        self._closed = False
        self._eof = False
        self._pending = b""
        self._ended = threading.Event()
        self._reading = threading.Lock()
        self.decoder = StreamDecoder()
        self.on_close: Callable[[], None] | None = None
        self.abandon = False
        """Set when the sandbox itself goes next: close() then leaves the process alone."""
        direct = endpoint(api)
        self._feed = None if direct is None else LogFeed(direct, process.session_id, process.id)
        self._queued: QueuedOutput | None = None
        if self._feed is None:
            self._resume(0)
        self._stdin = stdin_sink(api, process, direct, self._end)

    def _resume(self, skip: int) -> None:
        """Read the rest of the log (past ``skip`` characters) through the SDK."""
        self._queued = out = QueuedOutput()
        if self._ended.is_set():  # stdin broke meanwhile (``_end`` saw no queue to end)
            out.put(b"")
        threading.Thread(
            target=self._pump, args=(out, skip), name="sbx-vercel-out", daemon=True
        ).start()

    def _pump(self, out: QueuedOutput, skip: int) -> None:
        try:
            for text in self._api.logs(self.process, skip):
                data = self.decoder.feed(text)
                if data:
                    out.put(data)
        finally:
            self._ended.set()
            out.put(b"")

    def _end(self) -> None:
        """The stream is over (the shell ended, or its stdin no longer takes input)."""
        self._ended.set()
        if self._feed is not None:
            self._feed.close()  # wakes a read in progress: it returns the end
        if self._queued is not None:
            self._queued.put(b"")

    def read(self, timeout: float | None) -> bytes | None:
        """What the shell wrote; ``None`` after ``timeout`` s; ``b""`` at the end."""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        with self._reading:
            return self._read(None if timeout is None else time.monotonic() + timeout)

    def _read(self, deadline: float | None) -> bytes | None:
        while not self._eof:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._queued is not None:
                data = self._queued.read(left)
                self._eof = data == b""
                return data
            assert self._feed is not None
            try:
                text = self._feed.read(left)
            except StreamBroken:
                self._resume(self._feed.delivered)
                continue
            if text is None:
                return None
            if not text:
                self._eof = True
                self._ended.set()
            elif data := self.decoder.feed(text):
                return data
        return b""

    def read_line(self, timeout: float) -> bytes:
        """The first line of output (without its newline); later reads return what follows it."""
        line, self._pending = read_line(self.read, timeout)
        return line

    def write(self, data: bytes) -> None:
        """Send ``data`` to the shell's stdin; ``BrokenPipeError`` once the stream ended.

        A write that fails later ends the stream as EOF does."""
        if self._closed or self._eof or self._ended.is_set():
            raise BrokenPipeError("the session shell's stream has ended")
        self._stdin.write(data)

    @property
    def peer_gone(self) -> bool:
        """True once the shell's process ended (its log stream closed); takes in what
        arrived without waiting, unless another thread is reading."""
        if self._eof or self._closed or self._ended.is_set():
            return True
        feed = self._feed
        if self._queued is not None or feed is None or not self._reading.acquire(blocking=False):
            return False
        try:
            if feed.ended():
                self._ended.set()
        except StreamBroken:
            self._resume(feed.delivered)
        finally:
            self._reading.release()
        return self._ended.is_set()

    def _wait_end(self, timeout: float) -> bool:
        """Whether the stream ended within ``timeout`` seconds (its output discarded)."""
        deadline = time.monotonic() + timeout
        if self._queued is None and self._reading.acquire(timeout=timeout):
            try:
                while self._read(deadline) not in (None, b""):
                    pass
            finally:
                self._reading.release()
        return self._ended.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        if not self._close_once():
            return
        self._stdin.close()
        if not self._ended.is_set() and not self.abandon:
            self._api.close_stdin(self.process)  # an idle shell ends on EOF
            if not self._wait_end(2.0):
                self._api.kill(self.process)
        if self._feed is not None:
            self._feed.close()
