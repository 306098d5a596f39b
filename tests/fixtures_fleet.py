"""A fleet for tests: several real ``sbx worker`` processes, each with its own ``SBX_HOME``
as if on its own host, sharing one broker and one ledger."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from process_registry.runtime_dir import runtime_dir
from tests.fixtures_workers import worker_env
from tests.helpers import WorkerProcess, short_tmpdir, wait_until
from worker.client import SandboxClient
from worker.protocol.tasks import PING_TASK, own_queue_name
from worker.settings import Settings

SECRET = "fleet-secret-" + "k" * 24


class Fleet:
    """``size`` workers on ``broker_url`` (and ``ledger_url``), started on demand."""

    def __init__(
        self, size: int, broker_url: str, ledger_url: str | None = None, **env: str
    ) -> None:
        self.broker_url = broker_url
        self.ledger_url = ledger_url
        self.extra = dict(env)
        self.homes = [short_tmpdir(f"sbx-fleet{i}-") for i in range(size)]
        self.client_home = short_tmpdir("sbx-fleet-client-")
        self.workers: list[WorkerProcess | None] = [None] * size
        self._clients: list[SandboxClient] = []

    def env(self, i: int) -> dict[str, str]:
        extra = {"SBX_SECRET_KEY": SECRET, **self.extra}
        if self.ledger_url:
            extra["SBX_LEDGER_URL"] = self.ledger_url
        return worker_env(self.homes[i], self.broker_url, **extra)

    def settings(self, **overrides: Any) -> Settings:
        return Settings(
            home=self.client_home,
            broker_url=self.broker_url,
            ledger_url=self.ledger_url,
            secret_key=SECRET,
            **overrides,
        )

    def client(self, session_id: str, **overrides: Any) -> SandboxClient:
        c = SandboxClient(session_id=session_id, settings=self.settings(**overrides))
        self._clients.append(c)
        return c

    def serving_pid(self, client: SandboxClient) -> int:
        """Pid of the worker whose session shell runs ``client``'s commands. The jailed
        shell sees no process of the worker, only its own mounts: each worker's home has
        its own runtime directory, which holds the session directories of its jails."""
        answer = json.loads(
            client.tool_call("terminal", {"command": "cut -d' ' -f5 /proc/self/mountinfo"})
        )
        mounts = str(answer.get("output", "")).split()
        for i, home in enumerate(self.homes):
            runtime = f"{runtime_dir(home)}/"
            if any(m.startswith(runtime) for m in mounts):
                return self.pid(i)
        raise AssertionError(f"no worker's runtime directory among the jail's mounts: {answer}")

    def start(self, i: int) -> WorkerProcess:
        """Start worker ``i`` and wait until its own queue answers a ping."""
        w = WorkerProcess(self.env(i), self.homes[i] / "worker.log")
        w.start()
        self.workers[i] = w
        assert w.proc is not None
        queue = own_queue_name(self.settings().queue, pid=w.proc.pid)
        probe = self.client("fleet-readiness")

        def ready() -> bool:
            if w.proc is not None and w.proc.poll() is not None:
                raise AssertionError(f"worker {i} exited early:\n{w.log()}")
            return probe.ask(PING_TASK, [], 1.0, queue=queue) == "pong"

        wait_until(ready, 90, f"worker {i} to answer on its own queue")
        return w

    def pid(self, i: int) -> int:
        w = self.workers[i]
        assert w is not None and w.proc is not None
        return w.proc.pid

    def worker_id(self, i: int) -> str:
        import socket

        return f"{socket.gethostname()}:{self.pid(i)}"

    def index_of(self, pid: int) -> int:
        """Which worker has process id ``pid``."""
        for i, w in enumerate(self.workers):
            if w is not None and w.proc is not None and w.proc.pid == pid:
                return i
        raise AssertionError(f"no worker of the fleet has pid {pid}")

    def kill(self, i: int) -> None:
        """SIGKILL worker ``i`` (it leaves everything as a crash would)."""
        w = self.workers[i]
        assert w is not None and w.proc is not None
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait(timeout=30)

    def close(self) -> None:
        for c in self._clients:
            c.close()
        for w in self.workers:
            if w is not None:
                w.stop()
        for home in [*self.homes, self.client_home]:
            shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def fleet_of(external_redis_url: str) -> Iterator[Any]:
    """Factory: ``fleet_of(size, **env)`` -> a started :class:`Fleet` on a real Redis."""
    import redis

    made: list[Fleet] = []

    def make(size: int = 3, *, broker_url: str | None = None, **env: str) -> Fleet:
        redis.Redis.from_url(external_redis_url).flushdb()
        fleet = Fleet(size, broker_url or external_redis_url,
                      external_redis_url if broker_url else None, **env)  # fmt: skip
        made.append(fleet)
        for i in range(size):
            fleet.start(i)
        return fleet

    yield make
    for fleet in made:
        fleet.close()
