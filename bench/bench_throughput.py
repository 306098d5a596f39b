"""Many sessions at once: N sessions x K calls through one worker (and two), beside a no-op.

    python -m bench.bench_throughput [--sessions 32] [--calls 20] [--workers 1,2]
                                      [--concurrency N] [--idle 1000]

Every session is a client thread sending its K ``echo hi`` calls one after the
other, all sessions at once; the baseline drives sbx's no-op task (``sbx.ping``,
a Celery round trip answered through the same mailbox) identically, in the same
run, against the same workers. Prints calls/s, p50, p99 and the ratios.
Targets at default settings, one worker: sbx calls/s >= 60% of the no-op's, p99
<= 2x the no-op's. (On two cores the load generator shares the machine with the
workers: two workers are reported beside one, with no target.)

``--idle`` also reports the memory of a worker holding that many idle local sessions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from bench.bench_core import external_redis
from worker.client import SandboxClient
from worker.protocol.tasks import PING_TASK, own_queue_name
from worker.settings import Settings

REPO = Path(__file__).resolve().parent.parent
SECRET = "bench-throughput-" + "s" * 20


@contextlib.contextmanager
def workers(
    root: Path,
    url: str,
    count: int,
    concurrency: int | None,
    extra: dict[str, str] | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` real workers on ``url``, each with its own home, ready when yielded."""
    procs = []
    settings = Settings(home=root / "client", broker_url=url, secret_key=SECRET)
    try:
        for i in range(count):
            home = root / f"w{i}"
            home.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
            env.update(SBX_HOME=str(home), SBX_BROKER_URL=url, SBX_SECRET_KEY=SECRET)
            env.update(extra or {})
            env["PYTHONPATH"] = str(REPO)
            argv = [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "WARNING"]
            if concurrency:
                argv += ["--concurrency", str(concurrency)]
            log = open(home / "worker.log", "ab")  # noqa: SIM115
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            procs.append(proc)
            with SandboxClient(session_id="ready", settings=settings) as probe:
                queue = own_queue_name(settings.queue, pid=proc.pid)
                deadline = time.monotonic() + 90
                while probe.ask(PING_TASK, [], 1.0, queue=queue) != "pong":
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit(f"worker {i} did not start; see {home}/worker.log")
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)


class Load:
    """Per-call latencies of ``sessions`` threads each making ``calls`` calls at once."""

    def __init__(self, latencies: list[float], wall: float) -> None:
        self.latencies = sorted(latencies)
        self.wall = wall

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall

    def pct(self, q: float) -> float:
        return self.latencies[min(len(self.latencies) - 1, int(q * len(self.latencies)))]


def drive(
    settings: Settings, sessions: int, calls: int, make: Callable[[SandboxClient], None], tag: str
) -> Load:
    clients = [
        SandboxClient(session_id=f"{tag}-{i}", settings=settings) for i in range(sessions)
    ]
    for c in clients:  # first call outside the clock: sessions start their shells
        make(c)
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(sessions + 1)

    def session(c: SandboxClient) -> None:
        mine = []
        start.wait()
        for _ in range(calls):
            t = time.perf_counter()
            make(c)
            mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=session, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    cpu = time.process_time()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    print(f"  (load generator CPU {(time.process_time() - cpu) / (sessions * calls) * 1e3:.2f}"
          f" ms/call for {tag})")
    for c in clients:
        c.close()
    return Load(latencies, wall)


def cpu_seconds(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU time of the workers and everything they run (session shells included)."""
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(proc.pid)
            for q in [p, *p.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = q.cpu_times()
                    total += times.user + times.system + times.children_user + times.children_system
    return total


def echo(c: SandboxClient) -> None:
    out = json.loads(c.tool_call("terminal", {"command": "echo hi"}))
    assert out.get("output") == "hi\n", out


def noop(c: SandboxClient) -> None:
    assert c.ask(PING_TASK, [], 60.0) == "pong"


def idle_memory(root: Path, url: str, count: int) -> str:
    """Memory of a worker holding ``count`` idle local sessions: with their shells, then
    once they rest (``SBX_SHELL_IDLE_TTL``, 2 s here)."""
    settings = Settings(home=root / "client", broker_url=url, secret_key=SECRET)
    extra = {"SBX_SHELL_IDLE_TTL": "2", "SBX_LOST_AFTER": "2"}
    with workers(root / "idle", url, 1, None, extra) as (proc,):
        worker = psutil.Process(proc.pid)
        before = worker.memory_info().rss
        for i in range(count):
            with SandboxClient(session_id=f"idle-{i}", settings=settings) as c:
                echo(c)
        shells = worker.children(recursive=True)
        shells_uss = sum(_uss(p) for p in shells)
        busy_rss = worker.memory_info().rss
        deadline = time.monotonic() + 120
        while worker.children(recursive=True) and time.monotonic() < deadline:
            time.sleep(0.5)  # the worker's reaper rests idle shells: measuring, not syncing
        rested_rss = worker.memory_info().rss
    per = (rested_rss - before) / count
    return (
        f"{count} idle local sessions: worker RSS {before / 2**20:.0f} MiB empty, "
        f"{busy_rss / 2**20:.0f} MiB with them + {len(shells)} shells using "
        f"{shells_uss / 2**20:.0f} MiB; once they rest: {rested_rss / 2**20:.0f} MiB, no "
        f"shells ({per / 1024:.0f} KiB per idle session)"
    )


def _uss(p: psutil.Process) -> int:
    try:
        return int(p.memory_full_info().uss)
    except psutil.Error:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--idle", type=int, default=0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sbx-bench-tp-", dir="/tmp"))
    try:
        with external_redis() as url:
            if url is None:
                raise SystemExit("this bench needs redis-server")
            print(f"{args.sessions} sessions x {args.calls} calls, all at once; "
                  f"concurrency {args.concurrency or 'default'}")  # fmt: skip
            print(f"{'workers':>7} {'path':<12} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
            for count in (int(x) for x in args.workers.split(",")):
                db = url.replace("/0", f"/{count}")
                settings = Settings(home=root / "client", broker_url=db, secret_key=SECRET)
                with workers(root / f"n{count}", db, count, args.concurrency) as procs:
                    cpu0 = cpu_seconds(procs)
                    base = drive(settings, args.sessions, args.calls, noop, f"noop{count}")
                    cpu1 = cpu_seconds(procs)
                    sbx = drive(settings, args.sessions, args.calls, echo, f"sbx{count}")
                    cpu2 = cpu_seconds(procs)
                    calls = args.sessions * (args.calls + 1)
                    spent = {"no-op": (cpu1 - cpu0) / calls, "sbx echo": (cpu2 - cpu1) / calls}
                    for name, load in (("no-op", base), ("sbx echo", sbx)):
                        p50, p99 = load.pct(0.5) * 1e3, load.pct(0.99) * 1e3
                        print(f"{count:>7} {name:<12} {load.rate:8.0f} {p50:8.1f} {p99:8.1f}"
                              f"   worker CPU {spent[name] * 1e3:.2f} ms/call")  # fmt: skip
                    print(f"{'':>7} ratios: calls/s {sbx.rate / base.rate:.2f} (target >= 0.60),"
                          f" p99 {sbx.pct(0.99) / base.pct(0.99):.2f} (target <= 2.0)")  # fmt: skip

            if args.idle:
                print(idle_memory(root, url.replace("/0", "/9"), args.idle))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
