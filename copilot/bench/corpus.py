"""Realistic vectors at any size, grown from real texts (the data root, ``tests/data``), never uniform random ones.

Uniform random vectors are the worst case for HNSW and say nothing about papers: real embeddings lie on a
low-dimensional, clustered surface. So the benchmark embeds every real text it has (paper paragraphs and
abstracts, ScholarQA snippets and answers, SciFact abstracts, LoCoMo turns, the simulated life statements:
about 16k texts) with the product's own embedder, and grows any size from them: each derived vector is a real
one moved part of the way towards one of its 20 nearest real neighbours (a share drawn from [0, 0.5)), plus
small Gaussian noise (σ = 0.01 per dimension, about cosine 0.98 to where it started), renormalised. Each keeps
its real text. Queries are real questions (ScholarQA inputs and SciFact claims), embedded the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from copilot.association.data import DEFAULT_LIVES_DIR, locomo_path
from copilot.config import DATA_ROOT

NEIGHBOURS = 20
NOISE = 0.01
MAX_TEXT_CHARS = 1200


def real_texts(shared: Path = DATA_ROOT, limit: int = 16_000) -> list[str]:
    """Distinct real texts, papers first."""
    texts: list[str] = []
    for path in sorted((shared / "papers").glob("*.json")):
        paper = json.loads(path.read_text())
        texts.append(paper.get("abstract") or "")
        texts += [p.get("text", "") for p in (paper.get("pdf_parse") or {}).get("body_text", [])]
    for item in json.loads((shared / "scholarqa" / "scholarqa_multi_human_answers.json").read_text()):
        texts += [c.get("text", "") for c in item.get("ctxs", [])]
        texts.append(item.get("output", ""))
    for line in (shared / "scholarqa" / "scifact_test.jsonl").read_text().splitlines():
        texts += [c.get("text", "") for c in json.loads(line).get("gold_ctx", [])]
    for conversation in json.loads(locomo_path(shared).read_text()):
        for key, session in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts += [turn.get("text", "") for turn in session]
    for path in sorted(DEFAULT_LIVES_DIR.glob("lives_*.jsonl")):
        for line in path.read_text().splitlines():
            life = json.loads(line)
            texts += [life.get("statement", ""), *life.get("triggers", [])]
    seen: set[str] = set()
    distinct = []
    for text in texts:
        if not isinstance(text, str):
            continue
        text = " ".join(text.split())[:MAX_TEXT_CHARS]
        if len(text) >= 20 and text not in seen:
            seen.add(text)
            distinct.append(text)
    return distinct[:limit]


def real_queries(shared: Path = DATA_ROOT, limit: int = 200) -> list[str]:
    questions = [item["input"] for item in json.loads(
        (shared / "scholarqa" / "scholarqa_multi_human_answers.json").read_text())]
    questions += [json.loads(line)["input"] for line in (shared / "scholarqa" / "scifact_test.jsonl").read_text()
                  .splitlines()]
    return questions[:limit]


def embedded(texts: list[str], cache: Path, embed: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
    """``embed(texts)``, cached in ``cache`` (keyed by the texts) so reruns skip the embedding."""
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    if cache.exists():
        saved = np.load(cache)
        if str(saved["key"]) == key:
            return saved["vectors"]
    vectors = embed(texts)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, key=key, vectors=vectors)
    return vectors


def nearest_neighbours(base: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """Each real vector's ``k`` nearest other real vectors."""
    found = np.zeros((len(base), k), dtype=np.int64)
    for start in range(0, len(base), 2048):
        scores = base[start:start + 2048] @ base.T
        for row in range(len(scores)):
            scores[row, start + row] = -np.inf
        found[start:start + 2048] = np.argpartition(-scores, k, axis=1)[:, :k]
    return found


def derived(base: np.ndarray, neighbours: np.ndarray, n: int, seed: int = 0, batch: int = 50_000
            ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``n`` realistic vectors in batches, each with the index of the real text it grew from."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, batch):
        size = min(batch, n - start)
        origin = rng.integers(0, len(base), size)
        towards = neighbours[origin, rng.integers(0, neighbours.shape[1], size)]
        share = rng.random(size, dtype=np.float32)[:, None] * 0.5
        vectors = (1 - share) * base[origin] + share * base[towards]
        vectors += rng.normal(0, NOISE, size=vectors.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield origin, vectors.astype(np.float32)
