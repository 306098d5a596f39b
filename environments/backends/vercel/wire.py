"""The session shell's stdin, spoken directly over HTTP/1.1.

A warm call of the session shell is one stdin request and the output read from
the shell's NDJSON log stream (:mod:`.logfeed`). Through the SDK one stdin write
costs ~0.6 ms of client CPU (URL parsing and request building in its HTTP client,
h11, three wrapper layers) -- more than the whole round trip through the
service's handler. This module speaks exactly this documented endpoint on a
kept-alive connection (TLS with verified certificates for ``https``), with the
SDK's semantics:

* ``POST {base}/v2/sandboxes/sessions/{sid}/cmd/{cid}/stdin?teamId=``, JSON
  ``{"data": base64, "offset": n}`` -> ``{"bytesWritten": n}``. Every request
  carries the offset of its first byte, so resending it after a lost answer,
  a dropped connection, 429 or 502-504 never duplicates input (the service
  skips what it has). Any other refusal ends the writer: the shell no longer
  takes input.

Everything else (lifecycle, helpers, files, closing stdin) stays with the SDK.
:func:`.http11.endpoint_for` returns ``None`` when a proxy applies to the API's
address (the SDK's HTTP client honours the proxy variables; :mod:`.http11` does
not): the SDK then carries stdin and the log stream too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import threading
import time
from collections.abc import Callable

from .http11 import Connection, Endpoint, WireError
from .logfeed import RETRYABLE

_RETRIES = 5
_CHUNK = 512 * 1024
"""Stdin bytes per request (the SDK's size: its base64 JSON stays under the API's 1 MB)."""


def _retry_delay(attempt: int, headers: dict[str, str] | None = None) -> float:
    """The SDK's backoff (0.4 s doubling; a 429's ``retry-after`` up to 20 s)."""
    with contextlib.suppress(KeyError, ValueError):
        if headers is not None:
            return min(max(float(headers["retry-after"]), 0.0), 20.0)
    return 0.4 * 2.0 ** max(attempt - 1, 0)


class StdinWriter:
    """Ordered writes to one process's stdin (see the module docstring).

    :meth:`write` never waits for the service: on an open connection with no request
    in flight the request leaves from the caller's thread, otherwise the data waits
    and goes out, coalesced, when the answer to the one in flight has come (at most
    512 KiB a request, as the SDK sends). A responder thread opens the connection,
    reads the answers and resends after failures; when the service refuses input for
    good it calls ``on_broken`` once and later writes raise ``BrokenPipeError``. The
    shell's stdin must be written through this writer only, from its start (offset 0).
    """

    def __init__(
        self, endpoint: Endpoint, session_id: str, process_id: str, on_broken: Callable[[], None]
    ) -> None:
        self._endpoint = endpoint
        self._path = endpoint.path(session_id, process_id, "stdin")
        self._on_broken = on_broken
        self._lock = threading.Lock()
        self._offset = 0
        self._pending = bytearray()
        self._busy = False
        self._broken = False
        self._closed = False
        self._current = (0, b"")
        self._conn: Connection | None = None
        self._unsent = False
        self._turns: queue.SimpleQueue[bool] = queue.SimpleQueue()
        threading.Thread(target=self._respond, name="sbx-vercel-stdin", daemon=True).start()

    def write(self, data: bytes) -> None:
        """Send ``data`` after everything written before; ``BrokenPipeError`` once broken."""
        with self._lock:
            if self._broken or self._closed:
                raise BrokenPipeError("the shell's stdin no longer takes input")
            if self._busy:
                self._pending += data
                return
            self._busy = True
            self._current = (self._offset, data[:_CHUNK])
            self._pending += data[_CHUNK:]
        conn = self._conn
        if conn is not None and conn.reusable:
            self._send()
        else:
            self._unsent = True  # the responder connects first
        self._turns.put(True)

    def close(self) -> None:
        """Stop the responder and drop the connection (stdin itself stays open)."""
        with self._lock:
            self._closed = True
        self._turns.put(False)
        conn = self._conn
        if conn is not None:
            conn.shutdown()

    def _request(self) -> bytes:
        offset, data = self._current
        body = json.dumps({"data": base64.b64encode(data).decode("ascii"), "offset": offset})
        head = self._endpoint.head(
            "POST",
            self._path,
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n",
        )
        return head + body.encode("ascii")

    def _send(self) -> None:
        """Send the current request, on a new connection when the last one is spent."""
        self._unsent = False
        try:
            if self._conn is None or not self._conn.reusable:
                self._reconnect()
            assert self._conn is not None
            self._conn.send(self._request())
        except OSError:
            self._unsent = True  # the responder resends on a new connection

    def _reconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._conn = Connection(self._endpoint, self._endpoint.request_timeout)

    def _respond(self) -> None:
        with contextlib.suppress(OSError):  # the first write connects again if this fails
            self._reconnect()
        while self._turns.get():
            try:
                self._finish_turn()
            except Exception:  # never leave a writer busy forever
                self._break()

    def _finish_turn(self) -> None:
        """Read answers (resending as needed) until no data waits; or break."""
        attempt = 0
        while not self._closed:
            try:
                if self._unsent or self._conn is None:
                    raise WireError("request not sent")
                status, headers, body = self._conn.read_response()
            except OSError:
                if self._closed or attempt >= _RETRIES:
                    return self._break()
                attempt += 1
                if attempt > 1:  # the first resend is at once (a stale kept-alive connection)
                    time.sleep(_retry_delay(attempt - 1))
                if self._conn is not None:
                    self._conn.reusable = False
                self._send()
                continue
            if status in RETRYABLE and attempt < _RETRIES:
                attempt += 1
                time.sleep(_retry_delay(attempt, headers if status == 429 else None))
                self._send()
                continue
            written = _bytes_written(body) if status == 200 else None
            start, data = self._current
            if written is None or not start <= written <= start + len(data):
                return self._break()
            with self._lock:
                self._offset = written
                if written < start + len(data):
                    self._current = (written, data[written - start :])
                elif self._pending:
                    self._current = (written, bytes(self._pending[:_CHUNK]))
                    del self._pending[:_CHUNK]
                else:
                    self._busy = False
                    return None
            attempt = 0
            self._send()
        return None

    def _break(self) -> None:
        with self._lock:
            already, self._broken, self._busy = self._broken, True, False
            self._pending.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if not already and not self._closed:
            self._on_broken()


def _bytes_written(body: bytes) -> int | None:
    try:
        value = json.loads(body).get("bytesWritten")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
