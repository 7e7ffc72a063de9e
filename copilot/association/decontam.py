"""Decontamination: a training pair that nearly repeats an evaluation item would measure memory, not skill.

A pair is dropped when its query or its statement has a cosine (base encoder) above ``threshold`` with any
evaluation text: held-out statements, triggers and questions, and benchmark memories and queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from copilot.association.data import Pair
from copilot.association.embedcache import EmbeddingCache

DEFAULT_THRESHOLD = 0.9


def max_similarity(vectors: np.ndarray, reference: np.ndarray, block: int = 2048) -> np.ndarray:
    """For each row of ``vectors``, its highest cosine with any row of ``reference`` (unit rows), in blocks."""
    if not len(reference):
        return np.full(len(vectors), -1.0, dtype=np.float32)
    best = np.full(len(vectors), -1.0, dtype=np.float32)
    for start in range(0, len(reference), block):
        chunk = reference[start:start + block]
        best = np.maximum(best, (vectors @ chunk.T).max(axis=1))
    return best


@dataclass
class Decontamination:
    kept: list[Pair]
    dropped: list[Pair]
    threshold: float


def decontaminate(pairs: Sequence[Pair], evaluation_texts: Sequence[str], cache: EmbeddingCache,
                  threshold: float = DEFAULT_THRESHOLD) -> Decontamination:
    """Split ``pairs`` into those far enough from every evaluation text and those that are not."""
    if not pairs:
        return Decontamination([], [], threshold)
    reference = cache.encode(list(dict.fromkeys(evaluation_texts)))
    queries = max_similarity(cache.encode([p.query for p in pairs]), reference)
    statements = max_similarity(cache.encode([p.statement for p in pairs]), reference)
    too_close = (queries > threshold) | (statements > threshold)
    kept = [p for p, bad in zip(pairs, too_close, strict=True) if not bad]
    dropped = [p for p, bad in zip(pairs, too_close, strict=True) if bad]
    return Decontamination(kept, dropped, threshold)
