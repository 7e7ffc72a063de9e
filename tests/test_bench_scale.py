"""``python -m copilot.bench scale`` on each storage backend: a small library built and measured end to end,
the same keys from both (the figures themselves are in docs/benchmarks.md, from the full sizes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from copilot.bench.scale import run_size
from copilot.storage.vectors import IndexOptions

pytestmark = pytest.mark.slow


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_both_backends_measure_the_same_things(backend: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_server").get_uri() if backend == "postgresql" else ""
    rng = np.random.default_rng(0)
    base, queries = unit(rng, 400), unit(rng, 25)
    texts = [f"text {i} " * 20 for i in range(400)]
    row = run_size(2000, base, texts, queries[5:], queries[:5], IndexOptions(), tmp_path, print, database_url=url)
    assert row["backend"] == ("postgres" if url else "sqlite") and row["n"] == 2000
    assert set(row) == {"backend", "n", "retrieve_p50_ms", "retrieve_p99_ms", "rebuild_p50_ms",
                        "insert_thought_p50_ms", "insert_paper_p50_ms", "open_s", "rss_mb", "recall_at_10", "index_mb",
                        "raw_mb"}
    assert row["recall_at_10"] >= 0.95 and row["index_mb"] > 0 and row["retrieve_p50_ms"] > 0
    assert list(tmp_path.iterdir()) == [], "the library is removed afterwards"
