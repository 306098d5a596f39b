"""The session shell's byte stream over the Vercel Sandbox API.

The shell is one SDK process (``sh`` with stdin piped). Input goes out as stdin
requests (:mod:`.stream`: one per command, sent from the caller's thread, its
answer read by another); output comes back on the process's NDJSON log stream,
read by a pump thread into a queue, so :meth:`VercelShellChannel.read` can wait
with a timeout.

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
from collections.abc import Callable

from environments.shell.queued import QueuedOutput, QueuedReads

from .sdk import Process, VercelApi
from .stream import ShellOutput, endpoint, stdin_sink

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


class VercelShellChannel(QueuedReads):
    """:class:`~environments.shell.channel.Channel` over the shell's SDK process.

    ``on_close`` runs once in :meth:`close`, before the shell's stdin is closed and
    the process killed (the environment kills a wedged shell's tree there)."""

    def __init__(self, api: VercelApi, process: Process) -> None:
        self._api = api
        self.process = process
        self._output = QueuedOutput()
        self._closed = False
        self._ended = threading.Event()
        self.decoder = StreamDecoder()
        self.on_close: Callable[[], None] | None = None
        self.abandon = False
        """Set when the sandbox itself goes next: close() then leaves the process alone."""
        direct = endpoint(api)
        self._source = ShellOutput(api, process, direct)
        self._stdin = stdin_sink(api, process, direct, self._end)
        threading.Thread(target=self._pump, name="sbx-vercel-out", daemon=True).start()

    def _end(self) -> None:
        """The stream is over (the shell ended, or its stdin no longer takes input)."""
        self._ended.set()
        self._output.put(b"")

    def _pump(self) -> None:
        try:
            for text in self._source:
                data = self.decoder.feed(text)
                if data:
                    self._output.put(data)
        finally:
            self._end()

    def write(self, data: bytes) -> None:
        """Send ``data`` to the shell's stdin; ``BrokenPipeError`` once the stream ended.

        A write that fails later ends the stream as EOF does."""
        if self._closed or self._output.eof or self._ended.is_set():
            raise BrokenPipeError("the session shell's stream has ended")
        self._stdin.write(data)

    @property
    def peer_gone(self) -> bool:
        """True once the shell's process ended (its log stream closed)."""
        return self._output.eof or self._closed or self._ended.is_set()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stdin.close()
        if self.on_close is not None:
            with contextlib.suppress(Exception):
                self.on_close()
        if not self._ended.is_set() and not self.abandon:
            self._api.close_stdin(self.process)  # an idle shell ends on EOF
            if not self._ended.wait(2.0):
                self._api.kill(self.process)
        self._source.close()
