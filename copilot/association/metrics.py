"""Retrieval metrics and the paired significance test used to compare two scorers on the same queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest


def recall_at_k(ranked_ids: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold ids found among the first ``k`` ranked ids (1.0 or 0.0 when there is one gold id)."""
    if not gold:
        raise ValueError("A query needs at least one gold id.")
    top = set(ranked_ids[:k])
    return sum(g in top for g in set(gold)) / len(set(gold))


def first_gold_rank(ranked_ids: Sequence[str], gold: Sequence[str]) -> int:
    """1-based rank of the best-placed gold id; ``len(ranked_ids) + 1`` when none is ranked."""
    wanted = set(gold)
    for rank, memory_id in enumerate(ranked_ids, start=1):
        if memory_id in wanted:
            return rank
    return len(ranked_ids) + 1


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test: among queries where the two scorers disagree, is "only B wins" a coin flip?"""

    b_only: int  # queries the second scorer gets right and the first misses
    a_only: int  # queries the first scorer gets right and the second misses
    p_value: float

    @property
    def discordant(self) -> int:
        return self.b_only + self.a_only


def mcnemar_exact(before: Sequence[float], after: Sequence[float]) -> McNemar:
    """Two-sided exact test on paired per-query outcomes (hit = 1, miss = 0).

    Only discordant pairs carry information; under the null hypothesis each one favours either scorer with
    probability 1/2, so the count favouring ``after`` is Binomial(discordant, 1/2). With fractional
    outcomes (several gold items) this is the sign test on the per-query differences, the same idea.
    """
    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    if a.shape != b.shape:
        raise ValueError("Paired outcomes must have the same length.")
    b_only = int(np.sum(b > a))
    a_only = int(np.sum(a > b))
    n = b_only + a_only
    p = 1.0 if n == 0 else float(binomtest(b_only, n, 0.5, alternative="two-sided").pvalue)
    return McNemar(b_only, a_only, p)
