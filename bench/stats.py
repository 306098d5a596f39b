"""Timing helpers shared by the benchmarks: medians and p95 from one run, side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Latency distribution of one measured path, in milliseconds."""

    name: str
    samples: list[float]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(name: str, fn: Callable[[], object], n: int, warmup: int = 10) -> Timing:
    """Call ``fn`` ``warmup`` times, then ``n`` times, timing each call."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000.0)
    return Timing(name, samples)


def measure_paths(
    paths: list[tuple[str, Callable[[], object]]], n: int, *, interleave: bool, warmup: int = 10
) -> list[Timing]:
    """``n`` samples of each path: in turns (``interleave``) or one path after another.

    On a shared machine load drifts over seconds: taking the samples of all
    paths in turns exposes each to the same drift, so their ratios hold; one
    path after another keeps each path's caches warm (tight loops flatter
    short paths such as raw bash).
    """
    if not interleave:
        return [measure(name, fn, n, warmup) for name, fn in paths]
    for _ in range(warmup):
        for _, fn in paths:
            fn()
    samples: list[list[float]] = [[] for _ in paths]
    for _ in range(n):
        for i, (_, fn) in enumerate(paths):
            t0 = time.perf_counter()
            fn()
            samples[i].append((time.perf_counter() - t0) * 1000.0)
    return [Timing(name, s) for (name, _), s in zip(paths, samples, strict=True)]


def report(timings: list[Timing], baseline: Timing) -> str:
    """A table of p50/p95 with each p50 as a ratio of ``baseline``'s p50."""
    width = max(len(t.name) for t in timings)
    lines = [f"{'path':<{width}}  {'p50 ms':>8}  {'p95 ms':>8}  {'x ' + baseline.name[:18]:>22}"]
    for t in timings:
        lines.append(f"{t.name:<{width}}  {t.p50:8.3f}  {t.p95:8.3f}  {t.p50 / baseline.p50:22.2f}")
    return "\n".join(lines)
