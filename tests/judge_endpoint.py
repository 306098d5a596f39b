"""A smart-mode approval judge for tests: an OpenAI-style chat endpoint on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def judge_endpoint(verdict: Callable[[str], str]) -> Iterator[tuple[str, list[str]]]:
    """Serve a judge answering ``verdict(request body)`` to every chat completion request;
    yields ``(base URL, the request bodies received so far)``. Stopped when the block ends."""
    bodies: list[str] = []

    class Judge(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            bodies.append(body)
            content = {"choices": [{"message": {"content": verdict(body)}}]}
            reply = json.dumps(content).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass  # requests are the test's business, not stderr's

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
