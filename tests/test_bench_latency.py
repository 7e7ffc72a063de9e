"""The latency benchmark's measuring and reporting, with a scripted LLM (the real run uses the embedded model)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.bench.cli import bench
from copilot.bench.latency import JSON_KEYS, QUESTIONS, Run, Turn, ask_all, json_row, markdown, summary
from copilot.config import Settings
from copilot.engine import Copilot
from copilot.storage import Store
from copilot.ui.services import Services
from tests.scripted_llm import ScriptedLLM


def test_summary_percentiles_errors_and_exact_json_keys() -> None:
    run = Run(users=2, waited_behind_thought=1, thought_lags_s=[3.0, 5.0], thoughts_pending=1, wall_s=12.0)
    run.turns = [Turn("u1", "q", 0.1, 2.0, 4.0), Turn("u2", "q", 0.3, 6.0, 8.0), Turn("u2", "q", error="LLMError: x")]
    row = summary(run)
    assert row["errors"] == 1 and row["waited_behind_thought"] == 1 and row["answers"] == 3
    assert row["ttft_p50_s"] == 4.0 and row["ttft_p95_s"] == pytest.approx(5.8)
    assert row["sources_p50_s"] == 0.2 and row["total_p95_s"] == pytest.approx(7.8)
    assert row["thought_lag_max_s"] == 5.0
    assert list(json_row(row)) == list(JSON_KEYS) == [
        "users", "sources_p50_s", "ttft_p50_s", "ttft_p95_s", "total_p50_s", "total_p95_s", "errors",
        "waited_behind_thought"]
    table = markdown([row])
    assert table.splitlines()[2].startswith("| 2 | 3 | 0.2 / ") and "(1 pending)" in table


def test_a_simulated_user_is_timed_through_the_chat_calls(tmp_path: Path) -> None:
    from copilot.embeddings import get_embedder

    settings = Settings(data_dir=tmp_path)
    embedder = get_embedder(settings)
    store = Store(tmp_path / "c.db", tmp_path / "i")
    store.db["papers"].insert({"id": "p1", "title": "SPECTER"})
    # A source for each question: a question nothing in scope bears on is declined before the model is asked.
    texts = ["SPECTER learns document embeddings with a triplet loss over the citation graph of scientific papers.",
             "S2ORC is a corpus of 81.1M English-language academic papers; it contains full text for 8.1M of them."]
    store.insert_with_vectors("chunks", [{"paper_id": "p1", "seq": i, "section": "Method", "text": text,
                                          "page_start": 1, "page_end": 1, "n_tokens": 20}
                                         for i, text in enumerate(texts)],
                              embedder.encode_documents(texts))
    llm = ScriptedLLM(answers=["SPECTER uses a triplet loss [1].", "It uses citations [1]."],
                      thoughts=[("thought: SPECTER is trained with a triplet loss on citations.\nanswered: yes\n",
                                 0.9)] * 2)
    services = Services(settings, Copilot(settings, store, embedder, llm))
    start = threading.Barrier(1)
    turns: list[Turn] = []
    ask_all(services, "ada", QUESTIONS[1:3], start, turns)
    assert [t.question for t in turns] == QUESTIONS[1:3] and all(t.error is None for t in turns)
    assert all(0 < t.sources_s <= t.first_word_s <= t.total_s for t in turns)
    assert turns[0].result.answer.startswith("SPECTER uses a triplet loss")
    assert services.copilot.flush(timeout=30)
    store.close()


def test_the_command_rejects_bad_user_counts() -> None:
    result = CliRunner().invoke(bench, ["latency", "--users", "two"])
    assert result.exit_code != 0 and "whole numbers" in result.output
    result = CliRunner().invoke(bench, ["latency", "--users", "0"])
    assert result.exit_code != 0 and "at least one user" in result.output
