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


# ----- the grounding calibration --------------------------------------------------------------------------


def test_grounding_pairs_set_each_answer_against_another_question_of_its_subject() -> None:
    import json

    from copilot.tools.calibration import DEFAULT_DATA, make_grounding_pairs

    subject = {item["id"]: item["subject"] for item in json.loads(DEFAULT_DATA.read_text())}
    pairs = make_grounding_pairs(n=20, seed=1)
    own, other = pairs[:20], pairs[20:]
    assert [p.label for p in own] == [1] * 20 and [p.label for p in other] == [0] * 20
    assert [p.item for p in own] == [p.item for p in other]
    assert all(a.sources != b.sources and a.sentences == b.sentences for a, b in zip(own, other, strict=True))
    by_sources = {tuple(p.sources): p.item for p in own}
    mates = [by_sources.get(tuple(p.sources)) for p in other]
    # Every negative's snippets are another sampled question's, of the same subject unless the subject is alone.
    alone = {s for s in subject.values() if [subject[p.item] for p in own].count(s) == 1}
    assert all(m is not None and m != p.item for m, p in zip(mates, other, strict=True))
    assert all(subject[m] == subject[p.item] for m, p in zip(mates, other, strict=True) if subject[p.item] not in alone)
    assert all("[" not in s for p in own for s in p.sentences), "citation markers are stripped"


def test_opening_and_threshold_report_by_hand() -> None:
    from copilot.tools.calibration import opening_length, threshold_report

    assert opening_length(["one two three", "four five", "six"], words=4) == 2
    assert opening_length(["one two"], words=10) == 1
    supports = [np.array([0.9, 0.6]), np.array([0.9, 0.2]), np.array([0.1, 0.7]), np.array([0.05, 0.1])]
    result = threshold_report([1, 1, 0, 0], supports, 0.5)
    assert result.sentences_kept_positive == 0.75 and result.sentences_kept_negative == 0.25
    assert result.answers_kept_positive == 0.5 and result.answers_kept_negative == 0.0
    assert result.half_kept_positive == 1.0 and result.half_kept_negative == 0.5


def test_grounding_report_separates_supported_from_unsupported_evidence() -> None:
    from copilot.types import GroundingEvidence
    from copilot.tools.calibration import GroundingPair, grounding_report

    rng = np.random.default_rng(0)
    pairs, found = [], []
    for label in (1, 0):
        for q in range(20):
            n = 3
            cosine = rng.uniform(0.55, 0.9, (n, 2)) if label else rng.uniform(0.1, 0.45, (n, 2))
            coverage = rng.uniform(0.3, 0.9, (n, 2)) if label else rng.uniform(0.0, 0.3, (n, 2))
            pairs.append(GroundingPair(f"q{q}", ["ten words in this sentence make it long enough here ok"] * n,
                                       ["s", "t"], label))
            found.append(GroundingEvidence(cosine.astype(np.float32), coverage.astype(np.float32), [["", ""]] * n))
    result = grounding_report(pairs, found, words=10)
    assert result.n_questions == 20 and result.sentences_per_answer == 1.0  # a 10-word opening: one sentence
    assert result.auc_sentence == 1.0 and result.auc_answer == 1.0 and result.auc_full_answer == 1.0
    assert result.chosen.answers_kept_positive == 1.0 and result.chosen.answers_kept_negative == 0.0
    assert result.cosine_weight > 0 and result.coverage_weight > 0
