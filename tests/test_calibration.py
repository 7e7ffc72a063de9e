"""The confidence calibration: its statistics on hand-computed examples and its pairs from the real data."""

import numpy as np
import pytest

from copilot.tools.calibration import (Pair, best_threshold, cross_validated_relevance, fit_relevance, make_pairs, rates,
                                 report, roc_auc)
from copilot.thoughts import RELEVANCE_BIAS, RELEVANCE_SLOPE, combined_confidence, relevance_probability


def test_roc_auc_by_hand() -> None:
    assert roc_auc([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    # positives 0.6, 0.4; negatives 0.5, 0.4: pairs (0.6>0.5) 1, (0.6>0.4) 1, (0.4<0.5) 0, (0.4=0.4) 0.5 -> 2.5/4
    assert roc_auc([1, 1, 0, 0], [0.6, 0.4, 0.5, 0.4]) == pytest.approx(0.625)


def test_rates_and_best_threshold_by_hand() -> None:
    labels, scores = [1, 1, 1, 0, 0], [0.9, 0.7, 0.3, 0.4, 0.1]
    assert rates(labels, scores, 0.5) == pytest.approx((2 / 3, 0.0))
    threshold, balanced = best_threshold(labels, scores)
    assert threshold == pytest.approx(0.55) and balanced == pytest.approx((2 / 3 + 1) / 2, abs=1e-3)


def test_relevance_curve_and_blend() -> None:
    assert relevance_probability(-RELEVANCE_BIAS / RELEVANCE_SLOPE) == pytest.approx(0.5)
    assert relevance_probability(0.9) > 0.99 and relevance_probability(0.0) < 0.05
    assert combined_confidence(0.2, 1.0, 0.5) == pytest.approx(0.6)
    assert combined_confidence(0.2, 1.0, 0.0) == pytest.approx(0.2)


def test_pairs_are_matched_and_deranged() -> None:
    pairs = make_pairs(n=10, seed=3)
    matched, mismatched = pairs[:10], pairs[10:]
    assert all(p.label == 1 for p in matched) and all(p.label == 0 for p in mismatched)
    assert [p.question for p in matched] == [p.question for p in mismatched]
    assert all(a.answer != b.answer for a, b in zip(matched, mismatched, strict=True))
    assert all(40 <= len(p.answer.split()) <= 160 for p in pairs)


def test_fit_and_cross_validation_separate_by_cosine() -> None:
    rng = np.random.default_rng(0)
    labels = np.array([1] * 20 + [0] * 20)
    cosines = np.where(labels == 1, rng.uniform(0.4, 0.9, 40), rng.uniform(-0.1, 0.3, 40))
    slope, bias = fit_relevance(cosines, labels)
    assert slope > 0 and 0.3 < -bias / slope < 0.4
    held_out = cross_validated_relevance(cosines, labels)
    assert roc_auc(labels.tolist(), held_out.tolist()) == 1.0
    pairs = [Pair("q", "a", int(y)) for y in labels]
    result = report(pairs, [0.5] * 40, cosines, 0.5, 0.5)
    assert result.model.auc == 0.5 and result.relevance.auc == 1.0 and result.combined.auc == 1.0
