"""The fleet path: a session's call through three workers beside one worker, same run.

    python -m bench.bench_fleet [--n 300] [--moves 5] [--lost-after 3]

Both setups run real ``sbx worker`` processes on one external redis-server (two
databases), each worker with its own ``SBX_HOME`` as if on its own host. The
fleet's call pays the lease lookup (one round trip) and goes to the lease
holder's own queue. Samples are taken in turns beside raw ``bash -c``.
Target: the routed call costs at most 10% more than the single-worker call.

Then the time to re-home a session: its worker is SIGKILLed and the next call
is answered by another worker (``session_moved``). Reported end to end (dominated
by the presence lifetime, ``SBX_LOST_AFTER``) and from the moment the dead
worker's presence lapsed (the rebuild itself).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from bench.bench_core import external_redis
from bench.stats import measure_paths, report
from worker.client import SandboxClient
from worker.protocol.leases import lease_key, presence_key
from worker.protocol.tasks import PING_TASK, own_queue_name
from worker.settings import Settings

REPO = Path(__file__).resolve().parent.parent
SECRET = "bench-fleet-" + "s" * 24


class Workers:
    """``size`` worker processes on ``url``, each with its own home under ``root``."""

    def __init__(self, root: Path, url: str, size: int, lost_after: float) -> None:
        self.url = url
        self.root = root
        self.lost_after = lost_after
        self.procs: list[subprocess.Popen[bytes]] = []
        self.settings = Settings(home=root / "client", broker_url=url, secret_key=SECRET)
        for i in range(size):
            self.procs.append(self._start(i))

    def _start(self, i: int) -> subprocess.Popen[bytes]:
        home = self.root / f"w{i}"
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
        env.update(
            SBX_HOME=str(home),
            SBX_BROKER_URL=self.url,
            SBX_SECRET_KEY=SECRET,
            SBX_LOST_AFTER=str(self.lost_after),
            SBX_HEARTBEAT_INTERVAL=str(min(1.0, self.lost_after / 4)),
            PYTHONPATH=str(REPO),
        )
        log = open(home / "worker.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "WARNING"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
        )  # fmt: skip
        with self.client("bench-ready") as probe:
            queue = own_queue_name(self.settings.queue, pid=proc.pid)
            deadline = time.monotonic() + 90
            while probe.ask(PING_TASK, [], 1.0, queue=queue) != "pong":
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"worker {i} did not start; see {home}/worker.log")
        return proc

    def client(self, session_id: str) -> SandboxClient:
        return SandboxClient(session_id=session_id, settings=self.settings)

    def holder_pid(self, session_id: str) -> int:
        ledger = redis.Redis.from_url(self.url, decode_responses=True)
        worker_id = ledger.get(lease_key(session_id))
        return int(str(worker_id).rpartition(":")[2])

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)


@contextlib.contextmanager
def workers(root: Path, url: str, size: int, lost_after: float) -> Iterator[Workers]:
    w = Workers(root, url, size, lost_after)
    try:
        yield w
    finally:
        w.close()


def echo(client: SandboxClient) -> None:
    out = json.loads(client.tool_call("terminal", {"command": "echo hi"}))
    assert out["output"] == "hi\n", out


def rehome_times(fleet: Workers, moves: int) -> tuple[list[float], list[float]]:
    """``(kill -> answer, presence lapsed -> answer)`` seconds for ``moves`` moves."""
    ledger = redis.Redis.from_url(fleet.url)
    whole, rebuild = [], []
    for i in range(moves):
        session = f"bench-move-{i}"
        with fleet.client(session) as client:
            echo(client)
            pid = fleet.holder_pid(session)
            worker_id = f"{socket.gethostname()}:{pid}"
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            index = next(n for n, p in enumerate(fleet.procs) if p.pid == pid)
            fleet.procs[index].wait()
            while ledger.exists(presence_key(worker_id)):
                time.sleep(0.005)  # polling the ledger: this is the measurement itself
            lapsed = time.monotonic()
            out = json.loads(client.tool_call("terminal", {"command": "echo hi"}))
            done = time.monotonic()
            assert out.get("session_moved") is True, out
            whole.append(done - killed)
            rebuild.append(done - lapsed)
            fleet.procs[index] = fleet._start(index)
    return whole, rebuild


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--lost-after", type=float, default=3.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sbx-bench-fleet-", dir="/tmp"))
    try:
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(external_redis())
            if url is None:
                raise SystemExit("the fleet bench needs redis-server")
            single = stack.enter_context(workers(root / "one", url, 1, args.lost_after))
            fleet = stack.enter_context(
                workers(root / "three", url.replace("/0", "/1"), 3, args.lost_after)
            )
            one_client = stack.enter_context(single.client("bench-single"))
            fleet_client = stack.enter_context(fleet.client("bench-fleet"))
            echo(one_client)
            echo(fleet_client)  # the session's lease is taken: later calls are routed

            def raw_bash() -> None:
                subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)

            timings = measure_paths(
                [
                    ("raw bash -c 'echo hi'", raw_bash),
                    ("terminal via one worker", lambda: echo(one_client)),
                    ("terminal via 3 workers (lease lookup + routed)", lambda: echo(fleet_client)),
                ],
                args.n,
                interleave=True,
            )
            print(report(timings, timings[0]))
            ratio = timings[2].p50 / timings[1].p50
            verdict = "meets" if ratio <= 1.10 else "misses"
            print(f"\nrouted call p50 = {ratio:.3f} x the single-worker call: {verdict} <= 1.10")
            whole, rebuild = rehome_times(fleet, args.moves)
            print(
                f"\nre-home after SIGKILL ({args.moves} moves, SBX_LOST_AFTER={args.lost_after:g}):"
                f" kill -> answer median {statistics.median(whole):.2f} s"
                f" (max {max(whole):.2f}); presence lapsed -> answer median"
                f" {statistics.median(rebuild) * 1000:.0f} ms (max {max(rebuild) * 1000:.0f})"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
