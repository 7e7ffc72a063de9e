"""``python -m copilot.bench models``: the default is the best answers within the first-word target, and the
relevance weight is the one the chosen model's verdicts call for."""

from __future__ import annotations

import json

from click.testing import CliRunner

from copilot.bench.cli import bench
from copilot.bench.models import (
    JSON_KEYS, best_relevance_weight, choose, json_row, markdown, mcnemar_p, spread,
)


def row(model: str, lookup: float, rouge: float, ttft: float, default: bool = False) -> dict:
    return {"model": model, "default": default, "abstract_rouge_l": rouge, "lookup_exact": lookup,
            "verdict_auc": 0.5, "ttft_p50_s": ttft, "tokens_per_s": 50.0, "rss_mb": 900.0, "lookup_questions": 8,
            "relevance_weight": 0.5, "combined_auc": 0.9}


def test_the_json_row_has_exactly_the_documented_keys() -> None:
    assert list(json_row(row("a", 0.5, 0.2, 1.0))) == ["model", "default", "abstract_rouge_l", "lookup_exact",
                                                       "verdict_auc", "ttft_p50_s", "tokens_per_s", "rss_mb"]
    assert JSON_KEYS == tuple(json_row(row("a", 0.5, 0.2, 1.0)))
    json.dumps(json_row(row("a", 0.5, 0.2, 1.0)))


def test_better_answers_win_then_rouge_breaks_a_tie() -> None:
    shipped = row("small", 0.25, 0.16, 1.4, default=True)
    assert choose([shipped, row("big", 0.5, 0.10, 1.8)])["model"] == "big"
    assert choose([shipped, row("big", 0.25, 0.20, 1.8)])["model"] == "big"
    assert choose([shipped, row("big", 0.25, 0.10, 1.8)])["model"] == "small"


def test_a_new_default_needs_more_facts_right_beyond_chance() -> None:
    # 8 questions, 4 right against 1 (the quick run's figures): McNemar p 0.25, so the shipped model stays.
    shipped = row("small", 1 / 8, 0.17, 1.4, default=True) | {"lookup_hits": [True] + [False] * 7}
    big = row("big", 4 / 8, 0.13, 1.3) | {"lookup_hits": [True] * 4 + [False] * 4}
    assert mcnemar_p(shipped["lookup_hits"], big["lookup_hits"]) == 0.25
    assert choose([shipped, big])["model"] == "small"
    # 40 questions, 20 right against 5 with the 5 shared: p below 0.001, so the better model is chosen.
    shipped = shipped | {"lookup_exact": 5 / 40, "lookup_hits": [True] * 5 + [False] * 35}
    big = big | {"lookup_exact": 20 / 40, "lookup_hits": [True] * 20 + [False] * 20}
    assert mcnemar_p(shipped["lookup_hits"], big["lookup_hits"]) < 0.001
    assert choose([shipped, big])["model"] == "big"


def test_a_model_past_the_first_word_target_is_not_chosen() -> None:
    shipped = row("small", 0.25, 0.16, 1.4, default=True)
    assert choose([shipped, row("big", 0.9, 0.3, 2.5)], target_s=2.0)["model"] == "small"
    # On a loaded machine, where even the shipped model misses the target, no slower model may win.
    slow_machine = row("small", 0.25, 0.16, 6.0, default=True)
    assert choose([slow_machine, row("big", 0.9, 0.3, 5.5)], target_s=2.0)["model"] == "big"
    assert choose([slow_machine, row("big", 0.9, 0.3, 7.0)], target_s=2.0)["model"] == "small"


def test_a_verdict_with_no_signal_leaves_confidence_to_relevance() -> None:
    labels = [1, 1, 1, 0, 0, 0]
    relevance = [0.9, 0.8, 0.7, 0.3, 0.2, 0.1]
    weight, auc = best_relevance_weight([0.5, 0.2, 0.9, 0.9, 0.3, 0.6], relevance, labels, threshold=0.5)
    assert auc == 1.0 and weight > 0.5
    # A verdict that separates the pairs on its own needs no relevance at all.
    weight, auc = best_relevance_weight([0.9, 0.9, 0.8, 0.1, 0.2, 0.1], relevance, labels, threshold=0.5)
    assert (weight, auc) == (0.0, 1.0)


def test_questions_are_spread_over_the_whole_set() -> None:
    assert spread(list(range(10)), 3) == [0, 4, 9] or spread(list(range(10)), 3) == [0, 5, 9]
    assert spread(list(range(4)), None) == [0, 1, 2, 3] and spread(list(range(4)), 9) == [0, 1, 2, 3]


def test_the_table_names_the_choice() -> None:
    rows = [row("small", 0.25, 0.16, 1.4, default=True), row("big", 0.5, 0.2, 1.8)]
    table = markdown(rows, choose(rows), 2.0)
    assert table.count("\n| ") == 2 and "Chosen: **big**" in table and "relevance weight of 0.5" in table
    assert "Lookup facts right" not in table  # without per-question hits there is no test to report
    rows[0]["lookup_hits"], rows[1]["lookup_hits"] = [True] + [False] * 7, [True] * 5 + [False] * 3
    table = markdown(rows, rows[0], 2.0)
    assert "Lookup facts right: big 5, small 1 of 8; exact McNemar p 0.125." in table


def test_measuring_one_model_needs_its_library() -> None:
    result = CliRunner().invoke(bench, ["models", "--one", "gemma3-270m"])
    assert result.exit_code == 2 and "--one needs --library" in result.output
