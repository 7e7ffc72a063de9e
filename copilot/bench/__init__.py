"""Benchmarks: measurements for docs/benchmarks.md, never tests (``python -m copilot.bench scale``)."""
