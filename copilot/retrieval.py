"""Retrieval over paper chunks and thoughts together: both indices, dense and lexical, one ranked list.

Dense candidates (5×K from each index, by cosine to the query vector) and lexical ones (5×K from each full-text
index, by BM25 over the question's words: ``store.text_search``) are found under the same scope. ``dense`` keeps the
first list, ``lexical`` the second; ``hybrid`` fuses both rankings (by default a weighted sum of min–max normalised
scores, lexical 0.7 and dense 0.3, chosen on the lookup set; or reciprocal rank fusion): a passage that holds the
question's rare words (an acronym, a name, a number) is found even when its embedding ranks it low. Each item's
``score`` stays its cosine to the query, whatever ranked it. The ranked candidates are then kept greedily: an item
whose cosine to an item already kept exceeds the dedup threshold adds nothing new and is skipped; items are packed
until K are kept or the token budget is spent. Chunks are scoped to shared papers and the asking user's own uploads;
thoughts to the asking user plus, when asked for, the public pool, and only confident, unflagged thoughts are
retrieved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import numpy as np

from copilot.config import Settings
from copilot.storage import Store
from copilot.storage.fulltext import query_terms
from copilot.types import PackedContext, RetrievedItem, VectorFilter

CANDIDATE_FACTOR = 5
RRF_K = 60  # the constant of reciprocal rank fusion (Cormack et al., 2009)
LEXICAL_WEIGHT = 0.7  # the lexical share of a weighted fusion (docs/benchmarks.md, "Hybrid retrieval")

RetrievalMode = Literal["dense", "lexical", "hybrid"]
Fusion = Literal["rrf", "weighted"]
RETRIEVAL_MODES: tuple[RetrievalMode, ...] = ("dense", "lexical", "hybrid")
Candidate = tuple[RetrievedItem, np.ndarray]
Key = TypeVar("Key")


def chunk_scope(user_id: str, paper_ids: Sequence[str] | None = None) -> VectorFilter:
    """Chunks ``user_id`` may retrieve: of shared (arXiv) papers and of their own uploads, within ``paper_ids``
    when given."""
    return VectorFilter(owner=user_id, shared=True, papers=None if paper_ids is None else frozenset(paper_ids))


def thought_scope(user_id: str, *, include_public: bool, min_confidence: float) -> VectorFilter:
    """Thoughts ``user_id`` may retrieve: their own (and public ones if asked), confident and not flagged."""
    return VectorFilter(owner=user_id, public=include_public, min_confidence=min_confidence, unflagged=True)


def chunk_items(store: Store, hits: list[tuple[int, float]]) -> list[Candidate]:
    """Search hits (chunk id, score) as retrieved items with their paper's title, and their vectors."""
    scores = dict(hits)
    return [
        (RetrievedItem("chunk", c.id, c.text, scores[c.id], depth=0, paper_id=c.paper_id, section=c.section,
                       page_start=c.page_start, page_end=c.page_end, n_tokens=c.n_tokens or 0,
                       paper_title=c.paper_title), c.vector)
        for c in store.chunks.get_many(list(scores))
    ]


def _thought_items(store: Store, hits: list[tuple[int, float]], recalled_by: str) -> list[Candidate]:
    scores = dict(hits)
    return [(RetrievedItem("thought", t.id, t.text, scores[t.id], depth=t.depth or 1, confidence=t.confidence,
                           recalled_by=recalled_by), t.vector) for t in store.thoughts.get_many(list(scores))]


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
    query_text: str | None = None,
    mode: RetrievalMode = "hybrid",
    fusion: Fusion = "weighted",
    lexical_weight: float = LEXICAL_WEIGHT,
) -> list[Candidate]:
    """Up to 5×K candidates from each index (and each of dense and lexical search), with their vectors, best
    first by ``mode``: ``dense`` (cosine), ``lexical`` (BM25 over ``query_text``) or ``hybrid`` (the two rankings
    fused by ``fusion``; ``lexical_weight`` is the lexical share of a weighted fusion). Without ``query_text`` the
    search is dense. :func:`retrieval_options` gives the last three from the settings.

    ``thought_query_vector``, when given, searches the thoughts instead of ``query_vector``: the association
    encoder's combined query, which also recalls thoughts that do not resemble the question.
    """
    if not query_terms(query_text):  # no word to search for (empty, or only function words)
        mode = "dense"
    n = CANDIDATE_FACTOR * k
    chunks = chunk_scope(user_id, paper_ids)
    thoughts = thought_scope(user_id, include_public=include_public, min_confidence=min_confidence)
    dense: list[Candidate] = []
    if mode != "lexical":
        dense = chunk_items(store, store.search("chunks", query_vector, n, chunks))
        if include_thoughts:
            associative = thought_query_vector is not None
            hits = store.search("thoughts", thought_query_vector if associative else query_vector, n, thoughts)
            dense += _thought_items(store, hits, "association" if associative else "embedding")
        dense.sort(key=lambda pair: pair[0].score, reverse=True)
        if mode == "dense":
            return dense
    lexical = _lexical(store, query_vector, query_text or "", n, chunks, thoughts if include_thoughts else None)
    if mode == "lexical":
        return [(item, vector) for item, vector, _ in lexical]
    return fuse(dense, lexical, fusion=fusion, lexical_weight=lexical_weight)


def retrieval_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of :func:`retrieve_mixture` that the settings choose (``COPILOT_RETRIEVAL*``)."""
    return {"mode": settings.retrieval, "fusion": settings.retrieval_fusion,
            "lexical_weight": settings.retrieval_lexical_weight}


def _lexical(store: Store, query_vector: np.ndarray, query_text: str, n: int, chunks: VectorFilter,
             thoughts: VectorFilter | None) -> list[tuple[RetrievedItem, np.ndarray, float]]:
    """The full-text candidates, best BM25 first, each with its vector and BM25 score; their ``score`` is set to
    their cosine to ``query_vector``, as dense candidates carry."""
    found = []
    for kind, scope in (("chunks", chunks), ("thoughts", thoughts)):
        if scope is None:
            continue
        hits = store.text_search(kind, query_text, n, scope)
        items = chunk_items(store, hits) if kind == "chunks" else _thought_items(store, hits, "words")
        bm25 = dict(hits)
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        for item, vector in items:
            found.append((item, vector, bm25[item.id]))
            item.score = float(vector @ query)
            item.recalled_by = "words"
    found.sort(key=lambda triple: triple[2], reverse=True)
    return found


def fused_order(rankings: Sequence[Sequence[tuple[Key, float]]], *, fusion: Fusion = "rrf",
                weights: Sequence[float] | None = None) -> list[Key]:
    """The keys of several rankings (each best first, as (key, score)) in one order. ``rrf``: a key scores the
    sum of 1/(60 + rank) over the rankings that hold it. ``weighted``: each ranking's scores are min–max
    normalised to [0, 1] and summed with ``weights`` (default: dense 1 - :data:`LEXICAL_WEIGHT`, lexical
    :data:`LEXICAL_WEIGHT`), 0 where a ranking lacks the key. Ties keep the order of first appearance (the first
    ranking's, then the next)."""
    if weights is None:
        weights = (1.0 - LEXICAL_WEIGHT, LEXICAL_WEIGHT)
    fused: dict[Key, float] = {}
    for ranked, weight in zip(rankings, weights, strict=True):
        if not ranked:
            continue
        scores = np.array([score for _, score in ranked], dtype=np.float64)
        low, span = float(scores.min()), float(scores.max() - scores.min())
        for rank, (key, score) in enumerate(ranked, start=1):
            if fusion == "rrf":
                gain = 1.0 / (RRF_K + rank)
            else:
                # One hit, or hits that tie, say nothing of how well they match: half the ranking's weight.
                gain = weight * ((score - low) / span if span > 0 else 0.5)
            fused[key] = fused.get(key, 0.0) + gain
    return sorted(fused, key=lambda key: fused[key], reverse=True)  # stable: first appearance breaks ties


def fuse(dense: list[Candidate], lexical: list[tuple[RetrievedItem, np.ndarray, float]], *,
         fusion: Fusion = "rrf", lexical_weight: float = LEXICAL_WEIGHT) -> list[Candidate]:
    """The dense candidates (best cosine first) and the lexical ones (best BM25 first, with their BM25 scores)
    as one ranking (:func:`fused_order`). BM25 scores of chunks and of thoughts come from two indexes with their
    own term statistics (a memory of a few thoughts gives every term a tiny IDF), so each kind's lexical ranking
    is fused on its own, at the lexical weight."""
    found: dict[tuple[str, int], Candidate] = {}
    for item, vector, *_ in [*dense, *lexical]:
        found.setdefault((item.kind, item.id), (item, vector))
    by_kind = [[((i.kind, i.id), score) for i, _, score in lexical if i.kind == kind] for kind in ("chunk", "thought")]
    order = fused_order([[((i.kind, i.id), i.score) for i, _ in dense], *by_kind], fusion=fusion,
                        weights=(1.0 - lexical_weight, lexical_weight, lexical_weight))
    return [found[key] for key in order]


def pack_context(
    candidates: list[Candidate],
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
