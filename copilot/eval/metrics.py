"""The evaluation's metrics: ROUGE, a BERTScore-style semantic F1, Recall@k, accuracy, win rate, bootstrap CIs.

ROUGE comes from the ``rouge-score`` package (the reference implementation); the semantic F1 matches each
token of one text to its most similar token of the other with the local embedder's contextual token vectors
(greedy matching as in BERTScore, no IDF weighting, no baseline rescaling), so it needs no download.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
# Texts are embedded in batches of windows of this many words (the embedder itself splits a window that is
# still longer than the model reads).
WINDOW_WORDS = 150


@lru_cache(maxsize=1)
def _scorer() -> RougeScorer:
    from rouge_score import rouge_scorer  # it loads scipy (seconds): only when a score is computed

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def rouge(candidate: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of ``candidate`` against ``reference`` (Porter stemming, as in the original)."""
    scores = _scorer().score(reference, candidate)
    return {name: float(scores[name].fmeasure) for name in ROUGE_TYPES}


def greedy_match_f1(candidate: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of greedy token matching between two matrices of unit token vectors.

    Precision averages, over the candidate's tokens, the best cosine to any reference token; recall the
    reverse. An empty side scores zero.
    """
    if len(candidate) == 0 or len(reference) == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    similarity = candidate @ reference.T
    precision = float(similarity.max(axis=1).mean())
    recall = float(similarity.max(axis=0).mean())
    f1 = 0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1}


def _windows(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[i:i + WINDOW_WORDS]) for i in range(0, len(words), WINDOW_WORDS)]


def token_matrix(encode_tokens: Callable[[Sequence[str]], list[np.ndarray]], text: str) -> np.ndarray:
    """All token vectors of ``text``, embedded window by window so long texts are not cut."""
    pieces = _windows(text)
    if not pieces:
        return np.zeros((0, 1), dtype=np.float32)
    return np.concatenate(encode_tokens(pieces), axis=0)


def semantic_f1(encode_tokens: Callable[[Sequence[str]], list[np.ndarray]], candidate: str, reference: str) -> float:
    """BERTScore-style F1 with ``encode_tokens`` (e.g. :meth:`copilot.embeddings.Embedder.encode_tokens`)."""
    cand, ref = token_matrix(encode_tokens, candidate), token_matrix(encode_tokens, reference)
    if len(cand) == 0 or len(ref) == 0:
        return 0.0
    return greedy_match_f1(cand, ref)["f1"]


def recall_at_k(ranking: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of ``gold`` found among the first ``k`` distinct entries of ``ranking``."""
    if not gold:
        return 0.0
    seen: list[str] = []
    for entry in ranking:
        if entry not in seen:
            seen.append(entry)
        if len(seen) == k:
            break
    return len(set(seen) & set(gold)) / len(set(gold))


def accuracy(predictions: Sequence[str | None], labels: Sequence[str]) -> float:
    """Share of exact matches; a missing prediction counts as wrong."""
    if not labels:
        return 0.0
    return sum(p == y for p, y in zip(predictions, labels, strict=True)) / len(labels)


# ----- pairwise preferences -----------------------------------------------------------------------------------

def combine_orders(first_order: int | None, second_order: int | None) -> float:
    """One item's score for answer A against answer B from two judgements with the answers swapped.

    ``first_order`` is the judge's pick (1 or 2) with A shown first; ``second_order`` with B shown first.
    A wins (1.0) only if the judge prefers it in both orders, loses (0.0) if it prefers B in both, and
    anything else (a position-biased or missing judgement) is a tie (0.5).
    """
    a_first = first_order == 1
    a_second = second_order == 2
    b_first = first_order == 2
    b_second = second_order == 1
    if a_first and a_second:
        return 1.0
    if b_first and b_second:
        return 0.0
    return 0.5


@dataclass
class WinRate:
    """Wins, ties and losses of a method against the reference method; ``rate`` counts a tie as half."""

    wins: int
    ties: int
    losses: int

    @property
    def n(self) -> int:
        return self.wins + self.ties + self.losses

    @property
    def rate(self) -> float:
        return (self.wins + 0.5 * self.ties) / self.n if self.n else 0.0


def win_rate(scores: Sequence[float]) -> WinRate:
    """Tally per-item scores from :func:`combine_orders`."""
    return WinRate(wins=sum(s == 1.0 for s in scores), ties=sum(s == 0.5 for s in scores),
                   losses=sum(s == 0.0 for s in scores))


# ----- confidence intervals ---------------------------------------------------------------------------------

def bootstrap_ci(values: Sequence[float], *, n_resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its percentile bootstrap interval over items.

    Items are few (4 papers, a few dozen questions), so the interval is what tells a real difference from
    noise; it is computed with a fixed seed so reports are reproducible.
    """
    data = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if data.size == 0:
        return (float("nan"), float("nan"), float("nan"))
    mean = float(data.mean())
    if data.size == 1:
        return (mean, mean, mean)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_resamples, data.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (mean, float(low), float(high))


def summarise(values: Sequence[float | None], *, seed: int = 0) -> dict[str, float | int | None]:
    """A metric over items as stored in the report: mean, 95% bootstrap interval, item count."""
    kept = [v for v in values if v is not None]
    if not kept:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    mean, low, high = bootstrap_ci(kept, seed=seed)
    return {"mean": round(mean, 4), "lo": round(low, 4), "hi": round(high, 4), "n": len(kept)}
