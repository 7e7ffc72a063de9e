from pathlib import Path

import numpy as np

from copilot.storage.vectors import VectorIndex, index_files


def unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_returns_cosines_best_first() -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 50)
    index = VectorIndex.build(16, np.arange(1000, 1050), vectors)
    hits = index.search(vectors[3], 5)
    assert hits[0][0] == 1003
    assert abs(hits[0][1] - 1.0) < 1e-5
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    expected = sorted(((float(vectors[i] @ vectors[3]), 1000 + i) for i in range(50)), reverse=True)[:5]
    assert [i for _, i in expected] == [i for i, _ in hits]


def test_allowed_ids_restrict_the_search() -> None:
    rng = np.random.default_rng(2)
    vectors = unit(rng, 20)
    index = VectorIndex.build(16, np.arange(20), vectors)
    hits = index.search(vectors[0], 5, allowed_ids=[5, 6, 7])
    assert {i for i, _ in hits} == {5, 6, 7}
    assert index.search(vectors[0], 5, allowed_ids=[]) == []


def test_remove_and_ids() -> None:
    rng = np.random.default_rng(3)
    index = VectorIndex.build(16, np.array([4, 8, 15]), unit(rng, 3))
    assert index.remove([8]) == 1
    assert sorted(index.ids().tolist()) == [4, 15]
    assert len(index) == 2


def test_save_is_atomic_and_keeps_newer_generations(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, 10)
    index = VectorIndex.build(16, np.arange(10), vectors)
    index.save(tmp_path, "chunks", 1)
    (tmp_path / "chunks.9.faiss").write_bytes(b"a newer file from another process")
    index.save(tmp_path, "chunks", 2)
    gens = sorted(g for _, g in index_files(tmp_path, "chunks"))
    assert gens == [2, 9]  # generation 1 removed, the newer 9 left alone
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    loaded = VectorIndex.load(tmp_path / "chunks.2.faiss")
    assert loaded.search(vectors[6], 1)[0][0] == 6
