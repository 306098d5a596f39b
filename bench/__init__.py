"""Benchmarks comparing sbx with the baselines in DESIGN.md."""
