"""Benchmarks: measurements for the README, never tests (``python -m copilot.bench scale``)."""
