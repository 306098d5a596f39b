"""Benchmarks comparing sbx with its baselines (docs/benchmarks.md)."""
