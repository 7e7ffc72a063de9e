"""Recall@k of a query set against its memories, plain cosine against the combined associative score.

One evaluator serves the ``eval`` command, the held-out lives and LoCoMo: every query is compared only
with the memories of its own group, both scorers rank the same base vectors, and per-query outcomes are
kept so that the two scorers can be compared query by query.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from copilot.association.adapter import QueryAdapter
from copilot.association.data import Memory, Query
from copilot.association.embedcache import EmbeddingCache
from copilot.association.metrics import McNemar, first_gold_rank, mcnemar_exact, recall_at_k
from copilot.association.scoring import combined_scores, fused_scores, message_parts

KS = (1, 5, 10)
UNTRAINED = "untrained"
ASSOCIATION = "association"
# The same two with a query of several sentences read as the product reads a message (scoring.message_parts).
UNTRAINED_BY_SENTENCE = "untrained, by sentence"
BY_SENTENCE = "association, by sentence"
ADAPTER_ONLY = math.inf  # as a weight: rank by cos(E_θ(q), m) alone


@dataclass
class EvalResult:
    """Per-query outcomes for each scorer: ``recall[scorer][k]`` and ``rank[scorer]`` (first gold rank)."""

    queries: list[Query]
    ks: tuple[int, ...]
    recall: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    rank: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    def percent(self, scorer: str, k: int) -> float:
        values = self.recall[scorer][k]
        return round(100.0 * float(values.mean()), 2) if len(values) else 0.0

    def mrr(self, scorer: str) -> float:
        return float(np.mean(1.0 / self.rank[scorer])) if len(self.rank[scorer]) else 0.0

    def summary(self, scorers: Sequence[str] = (UNTRAINED, ASSOCIATION)) -> dict:
        """The eval command's JSON: query count, then Recall@k in percent for each scorer."""
        out: dict = {"n_queries": self.n_queries}
        for scorer in scorers:
            out[scorer] = {f"recall@{k}": self.percent(scorer, k) for k in self.ks}
        return out

    def significance(self, k: int, before: str = UNTRAINED, after: str = ASSOCIATION) -> McNemar:
        """Exact McNemar test of ``after`` against ``before`` on per-query Recall@k."""
        return mcnemar_exact(self.recall[before][k], self.recall[after][k])

    def subset(self, kind: str) -> EvalResult:
        """Only the queries of one kind (e.g. ``trigger`` or ``direct``)."""
        keep = np.array([q.kind == kind for q in self.queries], dtype=bool)
        return EvalResult([q for q in self.queries if q.kind == kind], self.ks,
                          {s: {k: v[keep] for k, v in r.items()} for s, r in self.recall.items()},
                          {s: v[keep] for s, v in self.rank.items()})


def _scores(plain: np.ndarray, adapted: np.ndarray, memories: np.ndarray, weight: float) -> np.ndarray:
    if weight == ADAPTER_ONLY:
        return adapted @ memories.T
    return combined_scores(plain, adapted, memories, weight)


def _ranked_ids(scores: np.ndarray, ids: Sequence[str]) -> list[list[str]]:
    order = np.argsort(-scores, axis=1, kind="stable")
    return [[ids[j] for j in row] for row in order]


def evaluate(memories: Sequence[Memory], queries: Sequence[Query], cache: EmbeddingCache, adapter: QueryAdapter,
             scorers: dict[str, float] | None = None, ks: Sequence[int] = KS,
             by_sentence: Collection[str] = ()) -> EvalResult:
    """Rank each query's group of memories under each scorer (name → weight w; 0 is plain cosine). The scorers
    named in ``by_sentence`` read a query of several sentences as the product's recall reads a message: the whole
    and each sentence, fused (:func:`copilot.association.scoring.fused_scores`)."""
    scorers = scorers if scorers is not None else {UNTRAINED: 0.0, ASSOCIATION: adapter.weight}
    ks = tuple(sorted(set(int(k) for k in ks)))
    result = EvalResult(list(queries), ks)
    memory_vectors = cache.encode([m.text for m in memories])
    query_vectors = cache.encode([q.text for q in queries])
    adapted = adapter.adapt(query_vectors, [q.text for q in queries]) if len(query_vectors) else query_vectors
    parts = _sentence_parts(queries, cache, adapter, any(scorers.get(n) for n in by_sentence)) if by_sentence else None
    by_group: dict[str, list[int]] = {}
    for i, m in enumerate(memories):
        by_group.setdefault(m.group, []).append(i)
    for name, weight in scorers.items():
        recall = {k: np.zeros(len(queries)) for k in ks}
        rank = np.zeros(len(queries))
        for group, q_index in _queries_by_group(queries).items():
            m_index = by_group.get(group, [])
            ids = [memories[i].id for i in m_index]
            scores = _scores(query_vectors[q_index], adapted[q_index], memory_vectors[m_index], weight)
            if name in by_sentence and parts is not None:
                _fuse_parts(scores, q_index, parts, memory_vectors[m_index], weight)
            for row, ranked in zip(q_index, _ranked_ids(scores, ids), strict=True):
                gold = queries[row].gold
                rank[row] = first_gold_rank(ranked, gold)
                for k in ks:
                    recall[k][row] = recall_at_k(ranked, gold, k)
        result.recall[name] = recall
        result.rank[name] = rank
    return result


def _sentence_parts(queries: Sequence[Query], cache: EmbeddingCache, adapter: QueryAdapter, adapt: bool
                    ) -> tuple[dict[int, list[int]], np.ndarray, np.ndarray]:
    """For each query of several sentences, the rows of its sentences; their plain and adapted vectors."""
    rows: dict[int, list[int]] = {}
    texts: dict[str, int] = {}
    for i, query in enumerate(queries):
        sentences = message_parts(query.text)[1:]
        if sentences:
            rows[i] = [texts.setdefault(t, len(texts)) for t in sentences]
    plain = cache.encode(list(texts))
    adapted = adapter.adapt(plain, list(texts)) if adapt and len(plain) else plain
    return rows, plain, adapted


def _fuse_parts(scores: np.ndarray, q_index: Sequence[int], parts: tuple[dict[int, list[int]], np.ndarray, np.ndarray],
                memory_vectors: np.ndarray, weight: float) -> None:
    """Replace the row of each query of several sentences by its fused score (in place)."""
    rows, plain, adapted = parts
    for r, query in enumerate(q_index):
        if query in rows:
            mine = rows[query]
            sentences = _scores(plain[mine], adapted[mine], memory_vectors, weight)
            scores[r] = fused_scores(np.vstack([scores[r:r + 1], sentences]))[0]


def _queries_by_group(queries: Sequence[Query]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(q.group, []).append(i)
    return groups


def format_table(result: EvalResult, scorers: Sequence[str] = (UNTRAINED, ASSOCIATION), title: str = "") -> str:
    """A Markdown table of Recall@k (percent) per scorer, with the gain and McNemar p of the last over the first."""
    head = "| scorer | " + " | ".join(f"R@{k}" for k in result.ks) + " | MRR |"
    lines = [f"**{title}** ({result.n_queries} queries)" if title else f"{result.n_queries} queries", "", head,
             "|" + "---|" * (len(result.ks) + 2)]
    for scorer in scorers:
        cells = " | ".join(f"{result.percent(scorer, k):.1f}" for k in result.ks)
        lines.append(f"| {scorer} | {cells} | {result.mrr(scorer):.3f} |")
    if len(scorers) >= 2:
        first, last = scorers[0], scorers[-1]
        gains = " | ".join(f"{result.percent(last, k) - result.percent(first, k):+.1f}" for k in result.ks)
        lines.append(f"| gain | {gains} | {result.mrr(last) - result.mrr(first):+.3f} |")
        tests = [result.significance(k, first, last) for k in result.ks]
        cells = " | ".join(f"{t.p_value:.2g} ({t.b_only}/{t.a_only})" for t in tests)
        lines.append(f"| McNemar p (wins/losses) | {cells} | |")
    return "\n".join(lines)
