"""Retrieval over paper chunks and thoughts together: one query vector, both indices, one ranked list.

Candidates (5×K from each index) are merged by cosine, then kept greedily: an item whose cosine to an item
already kept exceeds the dedup threshold adds nothing new and is skipped; items are packed until K are kept
or the token budget is spent. Chunks are scoped to shared papers and the asking user's own uploads; thoughts to
the asking user plus, when asked for, the public pool, and only confident, unflagged thoughts are retrieved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from copilot.storage import Store
from copilot.types import PackedContext, RetrievedItem, VectorFilter

CANDIDATE_FACTOR = 5


def chunk_scope(user_id: str, paper_ids: Sequence[str] | None = None) -> VectorFilter:
    """Chunks ``user_id`` may retrieve: of shared (arXiv) papers and of their own uploads, within ``paper_ids``
    when given."""
    return VectorFilter(owner=user_id, shared=True, papers=None if paper_ids is None else frozenset(paper_ids))


def thought_scope(user_id: str, *, include_public: bool, min_confidence: float) -> VectorFilter:
    """Thoughts ``user_id`` may retrieve: their own (and public ones if asked), confident and not flagged."""
    return VectorFilter(owner=user_id, public=include_public, min_confidence=min_confidence, unflagged=True)


def chunk_items(store: Store, hits: list[tuple[int, float]]) -> list[tuple[RetrievedItem, np.ndarray]]:
    """Search hits (chunk id, score) as retrieved items with their paper's title, and their vectors."""
    scores = dict(hits)
    return [
        (RetrievedItem("chunk", c.id, c.text, scores[c.id], depth=0, paper_id=c.paper_id, section=c.section,
                       page_start=c.page_start, page_end=c.page_end, n_tokens=c.n_tokens or 0,
                       paper_title=c.paper_title), c.vector)
        for c in store.chunks.get_many(list(scores))
    ]


def _thought_items(store: Store, hits: list[tuple[int, float]]) -> list[tuple[RetrievedItem, np.ndarray]]:
    scores = dict(hits)
    return [(RetrievedItem("thought", t.id, t.text, scores[t.id], depth=t.depth or 1, confidence=t.confidence),
             t.vector) for t in store.thoughts.get_many(list(scores))]


def retrieve_mixture(
    store: Store,
    query_vector: np.ndarray,
    *,
    user_id: str,
    k: int = 8,
    include_thoughts: bool = True,
    include_public: bool = False,
    min_confidence: float = 0.5,
    paper_ids: Sequence[str] | None = None,
    thought_query_vector: np.ndarray | None = None,
) -> list[tuple[RetrievedItem, np.ndarray]]:
    """Up to 5×K candidates from each index, with their vectors, best cosine first.

    ``thought_query_vector``, when given, searches the thoughts instead of ``query_vector``: the association
    encoder's combined query, which also recalls thoughts that do not resemble the question.
    """
    n = CANDIDATE_FACTOR * k
    candidates = chunk_items(store, store.search("chunks", query_vector, n, chunk_scope(user_id, paper_ids)))
    if include_thoughts:
        associative = thought_query_vector is not None
        hits = store.search("thoughts", thought_query_vector if associative else query_vector, n,
                            thought_scope(user_id, include_public=include_public, min_confidence=min_confidence))
        thoughts = _thought_items(store, hits)
        for item, _ in thoughts:
            item.recalled_by = "association" if associative else "embedding"
        candidates += thoughts
    candidates.sort(key=lambda pair: pair[0].score, reverse=True)
    return candidates


def pack_context(
    candidates: list[tuple[RetrievedItem, np.ndarray]],
    *,
    k: int = 8,
    budget_tokens: int = 2000,
    dedup_threshold: float = 0.85,
    count_tokens: Callable[[str], int] | None = None,
) -> PackedContext:
    """Keep candidates greedily: skip near-duplicates of kept items and items that overflow the budget."""
    packed = PackedContext(candidates=len(candidates))
    kept_vectors: np.ndarray | None = None  # one row per kept item, filled in order
    for item, vector in candidates:
        if len(packed.items) >= k:
            break
        kept = len(packed.items)
        if kept and float(np.max(kept_vectors[:kept] @ vector)) > dedup_threshold:
            packed.skipped_duplicates += 1
            continue
        tokens = count_tokens(item.text) if count_tokens else (item.n_tokens or len(item.text) // 4)
        if packed.tokens + tokens > budget_tokens:
            packed.skipped_budget += 1
            continue
        item.n_tokens = tokens
        packed.items.append(item)
        packed.tokens += tokens
        if kept_vectors is None:
            kept_vectors = np.empty((k, len(vector)), dtype=np.float32)
        kept_vectors[kept] = vector
    return packed
