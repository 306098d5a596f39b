"""What the local backend's jail costs, beside the unjailed backend and raw bash, in one run.

    .venv/bin/python -m bench.bench_jail [--calls N] [--starts M] [--json]

* warm call: ``LocalEnvironment.exec("echo hi")`` in the bubblewrap jail, the same
  without a jail (``isolation: none``), and ``subprocess.run(["bash", "-c", ...])``;
  samples taken in turns so that all three share the machine's drift.
  Target: the jail adds at most 10% to a warm call (p50).
* session start: a new session's sandbox made and its first ``echo hi`` answered,
  jailed and not (bubblewrap's namespaces and mounts, the jail's init, the shell).
* background start: ``spawn`` until the process runs, jailed and not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from bench.stats import Timing, measure_paths
from environments.backends.local.config import LocalConfig
from environments.backends.local.environment import LocalEnvironment
from environments.backends.local.jail import probe

WARM_TARGET = 1.10


def _echo(env: LocalEnvironment) -> Callable[[], None]:
    def call() -> None:
        result = env.exec("echo hi")
        if result.output != "hi\n":
            raise RuntimeError(f"unexpected output: {result.output!r}")

    return call


def _bash() -> None:
    done = subprocess.run(["bash", "-c", "echo hi"], capture_output=True, check=True)
    if done.stdout != b"hi\n":
        raise RuntimeError(f"bash gave {done.stdout!r}")


def _session_start(config: LocalConfig) -> Callable[[], None]:
    count = iter(range(10**9))

    def start() -> None:
        env = LocalEnvironment(f"bench-start-{next(count)}", config)
        try:
            _echo(env)()
        finally:
            env.close()

    return start


def _background_start(env: LocalEnvironment, spool: str) -> Callable[[], None]:
    count = iter(range(10**9))

    def start() -> None:
        n = next(count)
        out, status = env.process_paths(f"pbench{n}", spool)
        spawned = env.spawn("exit 0", output_path=out, status_path=status)
        if spawned.pid <= 0:
            raise RuntimeError("no pid")

    return start


def _row(t: Timing) -> dict[str, float]:
    return {"p50": t.p50, "p95": t.p95, "n": len(t.samples)}


def run(calls: int, starts: int) -> dict[str, Any]:
    ok, why = probe(LocalConfig())
    if not ok:
        return {"skipped": why}
    workspace = tempfile.mkdtemp(prefix="sbx-bench-jail-")
    jailed_cfg = LocalConfig(cwd=workspace)
    plain_cfg = LocalConfig(cwd=workspace, isolation="none")
    jailed = LocalEnvironment("bench-jail", jailed_cfg)
    plain = LocalEnvironment("bench-plain", plain_cfg)
    try:
        warm = measure_paths(
            [("jailed", _echo(jailed)), ("unjailed", _echo(plain)), ("bash -c", _bash)],
            calls,
            interleave=True,
        )
        start = measure_paths(
            [("jailed", _session_start(jailed_cfg)), ("unjailed", _session_start(plain_cfg))],
            starts,
            interleave=True,
            warmup=2,
        )
        spawn = measure_paths(
            [("jailed", _background_start(jailed, workspace)),
             ("unjailed", _background_start(plain, workspace))],
            starts,
            interleave=True,
            warmup=2,
        )  # fmt: skip
    finally:
        jailed.close()
        plain.close()
    w = {t.name: t for t in warm}
    s = {t.name: t for t in start}
    b = {t.name: t for t in spawn}
    return {
        "warm": {name: _row(t) for name, t in w.items()},
        "warm_jail_over_unjailed_p50": w["jailed"].p50 / w["unjailed"].p50,
        "warm_jail_over_bash_p50": w["jailed"].p50 / w["bash -c"].p50,
        "warm_target": WARM_TARGET,
        "meets_target": w["jailed"].p50 / w["unjailed"].p50 <= WARM_TARGET,
        "session_start": {name: _row(t) for name, t in s.items()},
        "session_start_jail_over_unjailed_p50": s["jailed"].p50 / s["unjailed"].p50,
        "background_start": {name: _row(t) for name, t in b.items()},
        "background_start_jail_over_unjailed_p50": b["jailed"].p50 / b["unjailed"].p50,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="warm calls per path")
    parser.add_argument("--starts", type=int, default=40, help="session and process starts")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    r = run(args.calls, args.starts)
    if args.json or "skipped" in r:
        json.dump(r, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'path':28} {'p50 ms':>9} {'p95 ms':>9}")
    for group, title in (("warm", "warm echo hi"), ("session_start", "session start"),
                         ("background_start", "background start")):  # fmt: skip
        for name, row in r[group].items():
            print(f"{title + ', ' + name:28} {row['p50']:9.3f} {row['p95']:9.3f}")
    verdict = "ok" if r["meets_target"] else "MISSED"
    print(f"warm: jail/unjailed {r['warm_jail_over_unjailed_p50']:.3f}x "
          f"(target <= {WARM_TARGET:.2f}x: {verdict}), jail/bash -c "
          f"{r['warm_jail_over_bash_p50']:.3f}x")  # fmt: skip
    print(f"session start: jail/unjailed {r['session_start_jail_over_unjailed_p50']:.2f}x; "
          f"background start: jail/unjailed {r['background_start_jail_over_unjailed_p50']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
