"""Benchmark of command-approval detection and policy checks.

Run from the repository root::

    python -m bench.bench_approval [--iterations N]

Prints median and p95 (milliseconds) for:

* the baseline of this run: ``shlex.split`` of the benign command (a pure
  Python tokenisation, so ratios to it cancel out how fast or loaded the
  machine is);
* ``detect_dangerous_command`` + ``detect_hardline_command`` on a benign and a
  long dangerous command, cold (analysis cache cleared before every iteration:
  the real parsing cost) and warm (repeated command, served from the cache);
* the everyday list (the commands the tests require to pass without
  approval): the cold cost of each command, as p50/p95 over the list;
* ``ApprovalGuard.check`` with an in-memory store and a config file on disk
  (one ``stat`` per call), for the benign command and for a dangerous one that
  returns ``approval_required`` (deduplicated pending approval);
* the worst case: the slowest of the pathological inputs the tests use (each
  at most 64 KiB) and a 1 MB command refused before analysis, with peak
  memory.

Target: benign detection under 0.2 ms p50 (cold).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from registry.approval import (
    ApprovalConfigSource,
    ApprovalGuard,
    MemoryApprovalStore,
    detect_dangerous_command,
    detect_hardline_command,
)
from registry.approval import detect as detect_module
from tests.unit.registry.approval.test_detect_limits import PATHOLOGICAL
from tests.unit.registry.approval.test_everyday import EVERYDAY

BENIGN = "ls -la src/"
LONG_DANGEROUS = (
    "cd /srv/app && git pull --rebase origin main && npm ci --no-audit && npm run build -- --prod"
    " && docker compose -f deploy/compose.yml down && sudo rm -rf /var/www/html/*"
    " && cp -r dist/* /var/www/html/"
    " && curl -fsSL https://example.com/hooks/post-deploy.sh | bash -s -- --notify"
    ' && psql -h db -U app -c "DELETE FROM cache_entries"'
    ' && echo "deployed $(git rev-parse --short HEAD)"'
    " | tee -a deploy.log"
)
TARGET_MS = 0.2


def _measure(
    fn: Callable[[], object], iterations: int, before: Callable[[], object] | None = None
) -> list[float]:
    for _ in range(min(200, iterations)):
        if before:
            before()
        fn()
    samples: list[float] = []
    for _ in range(iterations):
        if before:
            before()
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _row(name: str, samples: list[float], baseline: float) -> str:
    p50 = statistics.median(samples)
    return f"{name:<58} {p50:>9.4f} {_p95(samples):>9.4f} {p50 / baseline:>8.1f}x"


def _detect(command: str) -> Callable[[], object]:
    return lambda: (detect_dangerous_command(command), detect_hardline_command(command))


def _everyday(iterations: int, clear: Callable[[], object]) -> list[float]:
    """Cold per-command cost over the everyday list (median of repeats per command)."""
    repeats = max(5, iterations // 100)
    per_command = []
    for command in EVERYDAY:
        per_command.append(statistics.median(_measure(_detect(command), repeats, clear)))
    return per_command


def _worst(clear: Callable[[], object]) -> tuple[float, str, float]:
    """Slowest pathological input (ms), its start, and peak memory (MB) over all of them."""
    slowest, label, peak = 0.0, "", 0.0
    for command in [*PATHOLOGICAL, "a;" * 500_000]:
        clear()
        tracemalloc.start()
        detect_dangerous_command(command)
        peak = max(peak, tracemalloc.get_traced_memory()[1] / 1e6)
        tracemalloc.stop()
        clear()
        t0 = time.perf_counter()
        detect_dangerous_command(command)
        elapsed = (time.perf_counter() - t0) * 1e3
        if elapsed > slowest:
            slowest, label = elapsed, repr(command[:16])
    return slowest, label, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3000)
    args = parser.parse_args(argv)
    n = args.iterations
    clear = detect_module._analyze_cached.cache_clear

    base_samples = _measure(lambda: shlex.split(BENIGN), n)
    baseline = statistics.median(base_samples)
    rows: list[tuple[str, list[float]]] = [
        ("baseline: shlex.split(benign)", base_samples),
        ("detect (both) benign, cold", _measure(_detect(BENIGN), n, clear)),
        ("detect (both) benign, warm cache", _measure(_detect(BENIGN), n)),
        (
            f"detect (both) long dangerous ({len(LONG_DANGEROUS)} chars), cold",
            _measure(_detect(LONG_DANGEROUS), n, clear),
        ),
        ("detect (both) long dangerous, warm cache", _measure(_detect(LONG_DANGEROUS), n)),
        (f"detect (both) everyday list ({len(EVERYDAY)} commands), cold", _everyday(n, clear)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text("command_denylist: ['git push --force*']\napprovals: {mode: manual}\n")
        guard = ApprovalGuard(store=MemoryApprovalStore(), config=ApprovalConfigSource(path))
        rows += [
            (
                "ApprovalGuard.check benign, cold",
                _measure(
                    lambda: guard.check(BENIGN, session_id="bench", backend="local"), n, clear
                ),
            ),
            (
                "ApprovalGuard.check dangerous -> approval_required, cold",
                _measure(
                    lambda: guard.check("rm -rf src", session_id="bench", backend="docker"),
                    n,
                    clear,
                ),
            ),
            (
                "ApprovalGuard.check long dangerous, cold",
                _measure(
                    lambda: guard.check(LONG_DANGEROUS, session_id="bench", backend="docker"),
                    n,
                    clear,
                ),
            ),
        ]
    print(f"{'case (' + str(n) + ' iterations)':<58} {'p50 ms':>9} {'p95 ms':>9} {'/base':>9}")
    for name, samples in rows:
        print(_row(name, samples, baseline))
    slowest, label, peak = _worst(clear)
    print(
        f"worst case over {len(PATHOLOGICAL) + 1} pathological inputs: {slowest:.1f} ms "
        f"({slowest / baseline:.0f}x base, {label}), peak memory {peak:.1f} MB"
    )
    p50 = statistics.median(rows[1][1])
    verdict = "OK" if p50 < TARGET_MS else "MISSED"
    print(f"target: benign detection p50 < {TARGET_MS} ms (cold): {p50:.4f} ms {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
