"""A fake of the Vercel Sandbox API on 127.0.0.1 for tests of the ``vercel_sandbox`` backend.

It implements the endpoints the real ``vercel-sandbox`` SDK calls (``server.py``
lists them) and executes commands for real, each runtime session in its own
bubblewrap jail (``runtime.py``). It checks credentials
(a fixed token and team id), records every request (``requests``), enforces
execution time limits, and lets a test act behind the client's back
(:meth:`FakeVercel.stop_behind_back`, :meth:`FakeVercel.destroy_behind_back`,
``service.max_sandboxes`` for quota errors, ``server.tear_next_log_stream`` to drop a
log stream's connection mid-chunk).

Needs root (bubblewrap and nsenter) like the apptainer stand-in.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from .server import FakeServer
from .service import FakeService

TOKEN = "fake-vercel-token-7d1c0b9e"
TEAM_ID = "team_fake0001"
PROJECT_ID = "prj_fake0001"

__all__ = ["PROJECT_ID", "TEAM_ID", "TOKEN", "FakeVercel"]


class FakeVercel:
    """The fake service, listening on 127.0.0.1 at a free port until :meth:`stop`."""

    def __init__(
        self, *, token: str = TOKEN, team_id: str = TEAM_ID, project_id: str = PROJECT_ID
    ) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="sbx-fake-vercel-", dir="/var/tmp"))
        self.service = FakeService(self.state, project_id)
        self.server = FakeServer(self.service, token, team_id)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(
                target=self.server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fake-vercel",
                daemon=True,
            ),
            threading.Thread(target=self._expire_loop, name="fake-vercel-expiry", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _expire_loop(self) -> None:
        while not self._stopped.wait(0.1):
            self.service.expire()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far: method, path, query, JSON body, user agent."""
        with self.server.record_lock:
            return list(self.server.requests)

    def requests_to(self, method: str, path_suffix: str) -> list[dict[str, Any]]:
        return [
            r for r in self.requests if r["method"] == method and r["path"].endswith(path_suffix)
        ]

    def stop_behind_back(self, name: str) -> None:
        """Stop the sandbox's running session, as its time limit or a user would."""
        with self.service.lock:
            session = self.service.sandboxes[name].session
            assert session is not None
            self.service.stop(session.id)

    def destroy_behind_back(self, name: str) -> None:
        self.service.destroy(name)

    def stop(self) -> None:
        self._stopped.set()
        self.server.shutdown()
        self.server.server_close()
        self.service.shutdown()
        shutil.rmtree(self.state, ignore_errors=True)
