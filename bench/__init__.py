"""Benchmarks (dev-only): `make bench` writes docs/performance.md."""
