"""Walking-skeleton benchmark: terminal calls beside raw bash and a Celery no-op, one run.

    python -m bench.bench_core [--n 300] [--sequential] [--stream]

Measures raw ``bash -c 'echo hi'``, a no-op Celery round trip, the terminal
tool in-process, and the terminal tool through a real worker on the embedded
broker and on an external redis-server (started here when installed). By
default the samples of all paths are taken in turns, so that load drifting on a
shared machine hits every path alike; ``--sequential`` measures one path after
another. ``--stream`` adds a streamed call (``exec_stream``: live output through the
ledger) on the embedded broker.
Target: through the worker on the embedded broker, p50 <= 2.5 x raw bash.
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.stats import Timing, measure_paths, report
from environments.pool import SandboxPool
from process_registry.sessions import load_or_create_secret
from registry.context import ToolContext
from registry.core import registry as tool_registry
from registry.discovery import discover_builtin_tools
from worker.broker.embedded import EmbeddedBroker
from worker.client import SandboxClient
from worker.settings import Settings

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def worker_process(home: Path, broker_url: str | None) -> Iterator[SandboxClient]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    home.mkdir(parents=True, exist_ok=True)
    load_or_create_secret(home / "secret.key")  # the deployment's secret, before its workers
    env.update(SBX_HOME=str(home), PYTHONPATH=str(REPO))
    if broker_url:
        env["SBX_BROKER_URL"] = broker_url
    log = open(home / "bench-worker.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "WARNING"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
    )  # fmt: skip
    client = SandboxClient(session_id="bench", settings=Settings(home=home, broker_url=broker_url))
    try:
        if not client.ping(timeout=60):
            raise SystemExit(f"worker did not start; see {home}/bench-worker.log")
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@contextlib.contextmanager
def external_redis() -> Iterator[str | None]:
    exe = shutil.which("redis-server")
    if exe is None:
        yield None
        return
    import socket

    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    import redis

    r = redis.Redis(port=port)
    deadline = time.monotonic() + 20
    while True:
        with contextlib.suppress(redis.RedisError):
            if r.ping():
                break
        if time.monotonic() > deadline:
            raise SystemExit("external redis-server did not start")
        time.sleep(0.01)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait()


def terminal_via(client: SandboxClient) -> None:
    out = json.loads(client.tool_call("terminal", {"command": "echo hi"}))
    assert out["output"] == "hi\n", out


def streamed_via(client: SandboxClient) -> None:
    *pieces, result = client.exec_stream("echo hi")
    assert pieces == ["hi\n"] and getattr(result, "exit_code", None) == 0, (pieces, result)


def run(n: int, *, interleave: bool = True, stream: bool = False) -> list[Timing]:
    discover_builtin_tools()
    pool = SandboxPool()
    ctx = ToolContext(session_id="bench", call_id="c", backend="local", pool=pool)
    call = {"command": "echo hi"}

    def raw_bash() -> None:
        subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)

    def in_process() -> None:
        out = json.loads(tool_registry.dispatch("terminal", call, ctx))
        assert out["output"] == "hi\n", out

    home = Path(tempfile.mkdtemp(prefix="sbx-bench-", dir="/tmp"))
    try:
        with contextlib.ExitStack() as stack:
            embedded = stack.enter_context(worker_process(home / "embedded", None))
            paths: list[tuple[str, Callable[[], object]]] = [
                ("raw bash -c 'echo hi'", raw_bash),
                ("sbx terminal in-process (dispatch)", in_process),
                ("celery no-op round trip (embedded)", lambda: embedded.ping(timeout=30)),
                ("sbx terminal via worker (embedded)", lambda: terminal_via(embedded)),
            ]
            if stream:
                paths.append(("sbx exec_stream via worker (embedded)",
                              lambda: streamed_via(embedded)))  # fmt: skip
            url = stack.enter_context(external_redis())
            if url is None:
                print("(no redis-server installed: external Redis path skipped)")
            else:
                external = stack.enter_context(worker_process(home / "redis", url))
                paths += [
                    ("celery no-op round trip (redis)", lambda: external.ping(timeout=30)),
                    ("sbx terminal via worker (redis)", lambda: terminal_via(external)),
                ]
            return measure_paths(paths, n, interleave=interleave)
    finally:
        pool.close_all()
        EmbeddedBroker(home / "embedded").stop()
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--sequential", action="store_true",
                        help="measure one path after another instead of in turns")  # fmt: skip
    parser.add_argument("--stream", action="store_true",
                        help="also measure a streamed call (exec_stream)")  # fmt: skip
    args = parser.parse_args()
    timings = run(args.n, interleave=not args.sequential, stream=args.stream)
    print("samples taken " + ("one path after another" if args.sequential else "in turns"))
    print(report(timings, timings[0]))
    embedded = next(t for t in timings if t.name == "sbx terminal via worker (embedded)")
    ratio = embedded.p50 / timings[0].p50
    verdict = "meets" if ratio <= 2.5 else "misses"
    print(f"\nterminal via worker (embedded) p50 = {ratio:.2f} x raw bash: {verdict} target 2.5x")


if __name__ == "__main__":
    main()
