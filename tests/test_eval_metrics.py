"""Every evaluation metric on examples small enough to compute by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from copilot.eval import metrics


def test_rouge_by_hand() -> None:
    # candidate "the cat sat", reference "the cat ran": unigrams 2 of 3 shared, bigrams 1 of 2, LCS "the cat".
    scores = metrics.rouge("the cat sat", "the cat ran")
    assert scores["rouge1"] == pytest.approx(2 / 3)
    assert scores["rouge2"] == pytest.approx(1 / 2)
    assert scores["rougeL"] == pytest.approx(2 / 3)
    assert metrics.rouge("The cat sat on the mat.", "the cat sat on the mat") == {"rouge1": 1.0, "rouge2": 1.0,
                                                                                   "rougeL": 1.0}
    # Porter stemming: "running models" and "run model" are the same words.
    assert metrics.rouge("running models", "run model")["rouge1"] == pytest.approx(1.0)
    # F1 with unequal lengths: candidate "a b c d" vs reference "a b": P = 2/4, R = 2/2, F = 2/3.
    assert metrics.rouge("alpha beta gamma delta", "alpha beta")["rouge1"] == pytest.approx(2 / 3)
    assert metrics.rouge("", "the cat") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}


def test_greedy_match_f1_by_hand() -> None:
    # Candidate tokens e1 and e2, reference token e1: P = (1 + 0) / 2, R = 1, F1 = 2·0.5·1 / 1.5.
    result = metrics.greedy_match_f1(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0]]))
    assert result["precision"] == pytest.approx(0.5)
    assert result["recall"] == pytest.approx(1.0)
    assert result["f1"] == pytest.approx(2 / 3)
    # One token each at cosine 0.6: P = R = F1 = 0.6.
    assert metrics.greedy_match_f1(np.array([[1.0, 0.0]]), np.array([[0.6, 0.8]]))["f1"] == pytest.approx(0.6)
    assert metrics.greedy_match_f1(np.zeros((0, 2)), np.array([[1.0, 0.0]]))["f1"] == 0.0


def test_semantic_f1_embeds_long_texts_in_windows() -> None:
    calls: list[list[str]] = []

    def encode_tokens(texts):  # noqa: ANN001, ANN202 - one unit row per word, all identical
        calls.append(list(texts))
        return [np.tile([0.6, 0.8], (len(t.split()), 1)) for t in texts]

    text = " ".join(f"w{i}" for i in range(400))
    assert metrics.token_matrix(encode_tokens, text).shape == (400, 2), "no token is cut"
    assert [len(p.split()) for p in calls[0]] == [150, 150, 100]
    assert metrics.semantic_f1(encode_tokens, text, "a b c") == pytest.approx(1.0)
    assert metrics.semantic_f1(encode_tokens, "", "a b c") == 0.0


@pytest.mark.slow
def test_semantic_f1_with_the_local_embedder() -> None:
    from copilot.config import Settings
    from copilot.embeddings import get_embedder

    encode = get_embedder(Settings()).encode_tokens
    reference = "The model is trained with a triplet loss over citations between papers."
    assert metrics.semantic_f1(encode, reference, reference) == pytest.approx(1.0, abs=1e-4)
    close = metrics.semantic_f1(encode, "The network learns from citation triplets between articles.", reference)
    far = metrics.semantic_f1(encode, "Bake the bread at two hundred degrees for forty minutes.", reference)
    assert 0 < far < close < 1


def test_recall_at_k_counts_distinct_documents() -> None:
    ranking = ["a", "a", "b", "c"]  # passages of document a twice, then b, then c
    assert metrics.recall_at_k(ranking, ["c"], 2) == 0.0  # the first 2 documents are a, b
    assert metrics.recall_at_k(ranking, ["c"], 3) == 1.0
    assert metrics.recall_at_k(ranking, ["b", "c"], 2) == 0.5
    assert metrics.recall_at_k(ranking, ["z"], 10) == 0.0
    assert metrics.recall_at_k([], ["a"], 5) == 0.0


def test_accuracy() -> None:
    assert metrics.accuracy(["true", None, "false"], ["true", "true", "true"]) == pytest.approx(1 / 3)
    assert metrics.accuracy([], []) == 0.0


def test_both_orders_and_ties() -> None:
    # first_order: A shown first; second_order: B shown first.
    assert metrics.combine_orders(1, 2) == 1.0  # A preferred both times
    assert metrics.combine_orders(2, 1) == 0.0  # B preferred both times
    assert metrics.combine_orders(1, 1) == 0.5  # always the first shown: position bias, a tie
    assert metrics.combine_orders(2, 2) == 0.5
    assert metrics.combine_orders(None, 2) == 0.5
    tally = metrics.win_rate([1.0, 0.5, 0.5, 0.0])
    assert (tally.wins, tally.ties, tally.losses, tally.n) == (1, 2, 1, 4) and tally.rate == 0.5
    assert metrics.win_rate([1.0, 1.0, 0.5]).rate == pytest.approx(2.5 / 3)
    assert metrics.win_rate([]).rate == 0.0


def test_bootstrap_ci() -> None:
    assert metrics.bootstrap_ci([0.3] * 5) == pytest.approx((0.3, 0.3, 0.3))
    assert metrics.bootstrap_ci([0.7]) == (0.7, 0.7, 0.7)
    # Two items 0 and 1: resampled means are 0, 0.5, 1 with chances 1/4, 1/2, 1/4, so the 95% interval is [0, 1].
    assert metrics.bootstrap_ci([0.0, 1.0]) == (0.5, 0.0, 1.0)
    values = list(np.linspace(0, 1, 20))
    mean, low, high = metrics.bootstrap_ci(values, seed=3)
    assert mean == pytest.approx(0.5) and low < mean < high
    assert metrics.bootstrap_ci(values, seed=3) == (mean, low, high), "reproducible with a seed"
    # The interval narrows like 1/sqrt(n): four times the items, about half the width.
    wide = metrics.bootstrap_ci(values)
    narrow = metrics.bootstrap_ci(values * 4)
    assert (narrow[2] - narrow[1]) == pytest.approx((wide[2] - wide[1]) / 2, rel=0.2)
    assert all(math.isnan(v) for v in metrics.bootstrap_ci([]))


def test_summarise_skips_missing_values() -> None:
    assert metrics.summarise([None, None]) == {"mean": None, "lo": None, "hi": None, "n": 0}
    assert metrics.summarise([1.0, None, 1.0]) == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 2}
