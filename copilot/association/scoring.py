"""The combined read-time score, and the one query vector through which the product searches by it.

score(q, m) = cos(E(q), E(m)) + w·cos(E_θ(q), E(m)). Memories stay encoded once by the frozen base model;
a query costs one base embedding plus the adapter's few matrix products, and no LLM call.

Because every E(m) is a unit vector, the combined score equals the dot product of E(m) with the single
query vector E(q) + w·E_θ(q). :meth:`AssociativeScorer.query_vectors` returns that vector normalised, which
scales all of one query's scores by the same positive factor, so every index that ranks by cosine returns
the combined-score ranking unchanged: the engine searches thoughts and memories with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from copilot.association.adapter import QueryAdapter, load_adapter, unit_rows

if TYPE_CHECKING:
    from copilot.embeddings import Embedder


def combined_scores(plain_queries: np.ndarray, adapted_queries: np.ndarray, memories: np.ndarray,
                    weight: float) -> np.ndarray:
    """Score matrix ``(n_queries, n_memories)``; all inputs are unit rows, ``weight`` is w."""
    scores = plain_queries @ memories.T
    if weight:
        scores = scores + weight * (adapted_queries @ memories.T)
    return scores


def combined_query_vectors(plain_queries: np.ndarray, adapter: QueryAdapter, weight: float) -> np.ndarray:
    """E(q) + w·E_θ(q): one vector per query whose dot product with E(m) is the combined score."""
    plain = np.asarray(plain_queries, dtype=np.float32)
    if not weight or not len(plain):
        return plain
    return (plain + weight * adapter.transform(plain)).astype(np.float32, copy=False)


class AssociativeScorer:
    """Scores stored memory vectors against a query with the combined score, and gives its query vectors."""

    def __init__(self, embedder: Embedder, adapter: QueryAdapter | None = None, weight: float | None = None) -> None:
        self.embedder = embedder
        self.adapter = adapter if adapter is not None else load_adapter()
        self.weight = float(self.adapter.weight if weight is None else weight)
        if self.adapter.dimension != embedder.dimension:
            raise ValueError(f"The adapter expects {self.adapter.dimension}-d vectors, the embedder gives "
                             f"{embedder.dimension}-d ones.")

    def plain_query_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """E(q) from the base model."""
        return self.embedder.encode_documents(texts)

    def score(self, query_text: str, memory_vectors: np.ndarray) -> np.ndarray:
        """Combined scores of one query against ``memory_vectors`` (unit rows, shape ``(n, dim)``)."""
        plain = self.plain_query_vectors([query_text])
        memories = np.asarray(memory_vectors, dtype=np.float32).reshape(-1, self.adapter.dimension)
        return combined_scores(plain, self.adapter.transform(plain), memories, self.weight)[0]

    def rank(self, query_text: str, memory_vectors: np.ndarray, k: int = 10) -> list[int]:
        """Indices of the ``k`` best memories for ``query_text``, best first."""
        scores = self.score(query_text, memory_vectors)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k else np.array([], dtype=int)
        return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]

    def query_vectors(self, plain: np.ndarray) -> np.ndarray:
        """Unit vectors, one per row E(q) of ``plain``, whose cosine ranking is the combined-score ranking."""
        return unit_rows(combined_query_vectors(plain, self.adapter, self.weight))
