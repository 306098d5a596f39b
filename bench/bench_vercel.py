"""The vercel_sandbox backend against the fake Vercel API, beside the SDK's own per-call exec.

    .venv/bin/python -m bench.bench_vercel [--calls N] [--creates M] [--json]

* warm ``VercelEnvironment.exec("echo hi")`` (one long-lived shell behind the process's
  stdin and NDJSON log stream) vs the SDK's ``run_process("echo", ["hi"])`` per call on
  the same sandbox, samples taken in turns so load drift hits all paths alike. Measured
  with the default shell (``auto``: bash when the image has it) and with ``shell="sh"``
  (dash here). Target: sbx p50 <= 20% of the baseline p50.
* create-to-first-result: a new session's first ``exec`` (sandbox created, shell started).

Both run against ``tests/fakes/vercel`` on 127.0.0.1 (commands execute for real in a
bubblewrap jail; needs root, bwrap and nsenter), so the numbers compare client-side
paths, not Vercel's network.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from typing import Any

from bench.stats import Timing, measure_paths, report

TARGET = 0.20


def run(calls: int, creates: int) -> dict[str, Any]:
    from pydantic import SecretStr

    from environments.backends.vercel import VercelConfig, VercelEnvironment
    from environments.backends.vercel.sdk import close_clients
    from tests.fakes.vercel import PROJECT_ID, TEAM_ID, TOKEN, FakeVercel

    fake = FakeVercel()
    config = VercelConfig(
        base_url=fake.base_url,
        token=SecretStr(TOKEN),
        team_id=TEAM_ID,
        project_id=PROJECT_ID,
        read_vercel_env=False,
    )
    try:
        env = VercelEnvironment("bench-vercel", config)
        dash = VercelEnvironment("bench-vercel-sh", config.model_copy(update={"shell": "sh"}))
        try:
            for made in (env, dash):
                assert made.exec("echo hi").output == "hi\n"
            sandbox = env._live()

            def sbx_exec(made: VercelEnvironment) -> None:
                result = made.exec("echo hi")
                if result.output != "hi\n":
                    raise RuntimeError(f"unexpected output {result.output!r}")

            def sdk_run_process() -> None:
                done = sandbox.run_process("echo", ["hi"], capture_output=True)
                if done.stdout != "hi\n":
                    raise RuntimeError(f"unexpected output {done.stdout!r}")

            timings = measure_paths(
                [
                    ("sbx exec, session shell (bash)", lambda: sbx_exec(env)),
                    ("sbx exec, session shell (sh)", lambda: sbx_exec(dash)),
                    ("sdk run_process", sdk_run_process),
                ],
                calls,
                interleave=True,
            )
        finally:
            env.close()
            dash.close()
        first: list[float] = []
        for _ in range(creates):
            fresh = VercelEnvironment(f"bench-create-{secrets.token_hex(4)}", config)
            started = time.perf_counter()
            try:
                if fresh.exec("echo hi").output != "hi\n":
                    raise RuntimeError("unexpected first output")
                first.append((time.perf_counter() - started) * 1000)
            finally:
                fresh.close()
    finally:
        close_clients()
        fake.stop()
    *shells, base = timings
    return {
        "timings": timings,
        "create": Timing("create to first result", first),
        "ratio_p50": {t.name: t.p50 / base.p50 for t in shells},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls of each path")
    parser.add_argument("--creates", type=int, default=5, help="new sessions timed")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    result = run(args.calls, args.creates)
    *shells, base = result["timings"]
    create: Timing = result["create"]
    if args.json:
        doc: dict[str, Any] = {
            t.name: {"p50": t.p50, "p95": t.p95, "n": len(t.samples)}
            for t in [*result["timings"], create]
        }
        doc["ratio_p50"] = result["ratio_p50"]
        doc["target_ratio_p50"] = TARGET
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print(report([*shells, base, create], base))
    for name, ratio in result["ratio_p50"].items():
        verdict = "ok" if ratio <= TARGET else "MISSED"
        print(f"{name} / run_process p50: {ratio:.1%} (target <= {TARGET:.0%}: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
