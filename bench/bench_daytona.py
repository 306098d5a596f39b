"""The daytona backend beside the SDK's own per-call exec, against the same fake, in one run.

    .venv/bin/python -m bench.bench_daytona [--calls N] [--sessions M] [--json]

* warm ``echo hi``: ``DaytonaEnvironment.exec`` (the session shell on one PTY
  websocket) vs ``sandbox.process.exec("echo hi")`` (one toolbox request, one
  shell per call) on the same sandbox, samples taken in turns.
  Target: sbx p50 <= 20% of the baseline p50.
* create-to-first-result: a new session's first ``exec`` (create the sandbox,
  open the terminal, start the session shell, run) vs the SDK's
  ``daytona.create()`` then ``process.exec`` on a fresh sandbox.

The fake runs in its own process (as Daytona would not share the client's
interpreter and its GIL). Needs the ``daytona`` SDK (``sbx[daytona]``),
bubblewrap and root (the fake's jail).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from bench.stats import Timing, measure_paths

TARGET = 0.20


def _timing(t: Timing) -> dict[str, float]:
    return {"p50": t.p50, "p95": t.p95, "n": len(t.samples)}


@contextlib.contextmanager
def fake_daytona() -> Iterator[dict[str, str]]:
    """``{"api_url", "token"}`` of a fake Daytona serving from its own process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.daytona"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the fake Daytona did not start")
        yield json.loads(line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def run(calls: int, sessions: int) -> dict[str, Any]:
    import daytona

    from environments.backends.daytona.config import DaytonaConfig
    from environments.backends.daytona.environment import DaytonaEnvironment

    with fake_daytona() as fake:
        config = DaytonaConfig(api_key=fake["token"], api_url=fake["api_url"], target="us")
        sdk = daytona.Daytona(
            daytona.DaytonaConfig(api_key=fake["token"], api_url=fake["api_url"], target="us")
        )
        env = DaytonaEnvironment("bench-warm", config=config)
        try:
            sandbox = env.sandbox

            def through_sbx() -> None:
                result = env.exec("echo hi")
                if (result.output, result.exit_code) != ("hi\n", 0):
                    raise RuntimeError(f"sbx gave {result}")

            def through_sdk() -> None:
                response = sandbox.process.exec("echo hi")
                if (response.result, response.exit_code) != ("hi\n", 0):
                    raise RuntimeError(f"process.exec gave {response}")

            warm_sbx, warm_sdk = measure_paths(
                [("sbx session shell", through_sbx), ("sdk process.exec", through_sdk)],
                calls,
                interleave=True,
            )
        finally:
            env.close()

        first_sbx: list[float] = []
        first_sdk: list[float] = []
        for _ in range(sessions):
            started = time.perf_counter()
            fresh = DaytonaEnvironment(f"bench-{secrets.token_hex(4)}", config=config)
            try:
                if fresh.exec("echo hi").output != "hi\n":
                    raise RuntimeError("first sbx call failed")
                first_sbx.append((time.perf_counter() - started) * 1000)
            finally:
                fresh.close()
            started = time.perf_counter()
            created = sdk.create(daytona.CreateSandboxFromSnapshotParams(network_block_all=True))
            try:
                if created.process.exec("echo hi").result != "hi\n":
                    raise RuntimeError("first sdk call failed")
                first_sdk.append((time.perf_counter() - started) * 1000)
            finally:
                created.delete()
    sbx_t = _timing(warm_sbx)
    sdk_t = _timing(warm_sdk)
    ratio = sbx_t["p50"] / sdk_t["p50"]
    return {
        "warm": {"sbx": sbx_t, "baseline": sdk_t, "ratio_p50": ratio, "target_ratio_p50": TARGET,
                 "meets_target": ratio <= TARGET},
        "first_result": {"sbx": _timing(Timing("sbx", first_sbx)),
                         "baseline": _timing(Timing("sdk", first_sdk))},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="measured warm calls per path")
    parser.add_argument("--sessions", type=int, default=10, help="new sessions measured")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    results = run(args.calls, args.sessions)
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    warm, first = results["warm"], results["first_result"]
    verdict = "ok" if warm["meets_target"] else "MISSED"
    print(f"{'path':34} {'p50 ms':>9} {'p95 ms':>9}")
    rows = [
        ("warm echo hi, sbx session shell", warm["sbx"]),
        ("warm echo hi, sdk process.exec", warm["baseline"]),
        ("first result, new sbx session", first["sbx"]),
        ("first result, sdk create + exec", first["baseline"]),
    ]
    for label, timing in rows:
        print(f"{label:34} {timing['p50']:9.3f} {timing['p95']:9.3f}")
    print(f"warm ratio (p50): {warm['ratio_p50']:.1%}  target <= {TARGET:.0%}: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
