"""The lookup benchmark's scoring on a tiny store, and the lookup set itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from copilot.bench.cli import bench
from copilot.bench.lookup import LOOKUP_SET, Question, first_hit, load_questions, normalise, score
from copilot.types import Paper, RetrievedItem

DIM = 8


def test_the_lookup_set_has_one_findable_fact_per_question() -> None:
    questions = load_questions()
    assert len(questions) >= 40
    assert len({q.id for q in questions}) == len(questions)
    assert len({q.paper for q in questions}) == 4
    assert all(q.question.strip() and 2 <= len(q.gold) <= 60 for q in questions)
    assert LOOKUP_SET.name == "lookup.jsonl"


def test_a_hit_is_a_chunk_of_the_right_paper_holding_the_gold() -> None:
    items = [RetrievedItem("thought", 1, "Resource Description Framework", 0.9),
             RetrievedItem("chunk", 2, "RDF (Resource\n Description   Framework)", 0.8, paper_id="other"),
             RetrievedItem("chunk", 3, "the RESOURCE description\nframework, RDF", 0.7, paper_id="p")]
    assert normalise("  A\n\tB  c ") == "a b c"
    assert first_hit(items, "Resource Description Framework", "p") == 3
    assert first_hit(items, "Web Ontology Language", "p") is None


@pytest.fixture
def tiny(open_store):  # noqa: ANN001, ANN201 - a store with two papers and the questions' vectors
    store = open_store()
    store.papers.add_many([Paper("pa", title="A", user_id="lookup"), Paper("pb", title="B", user_id="lookup"),
                           Paper("pc", title="Someone else's", user_id="eve")])
    eye = np.eye(DIM, dtype=np.float32)
    texts = [("pa", "XAI stands for Explainable Artificial Intelligence.", eye[0]),
             ("pa", "Models are trained on papers.", eye[1]),
             ("pb", "The corpus holds 81.1M papers.", eye[2]),
             ("pb", "Papers have citations.", eye[3]),
             ("pc", "XAI stands for Explainable Artificial Intelligence, says eve.", eye[4])]
    store.insert_with_vectors("chunks", [{"paper_id": p, "seq": i, "section": "Body", "text": t, "page_start": 1,
                                          "page_end": 1, "n_tokens": 10} for i, (p, t, _) in enumerate(texts)],
                              np.stack([v for _, _, v in texts]))
    questions = [Question("q1", "a", "What does XAI stand for?", "Explainable Artificial Intelligence"),
                 Question("q2", "b", "How many papers does the corpus hold?", "81.1M")]
    # Dense points q1 at the training chunk (the hit is 2nd), q2 straight at its answer.
    vectors = {questions[0].question: (eye[1] * 0.9 + eye[0] * 0.3), questions[1].question: eye[2]}
    return store, (lambda text: vectors[text] / np.linalg.norm(vectors[text])), questions


def test_score_recall_and_mrr(tiny) -> None:  # noqa: ANN001
    store, encode, questions = tiny
    rows = score(store, encode, questions, {"a": "pa", "b": "pb"}, ["dense", "lexical", "hybrid"], k=8)
    assert [set(r) for r in rows] == [{"method", "recall_at_8", "mrr"}] * 3
    by = {r["method"]: r for r in rows}
    assert by["dense"] == {"method": "dense", "recall_at_8": 1.0, "mrr": 0.75}  # ranks 2 and 1
    assert by["lexical"]["recall_at_8"] == 1.0 and by["lexical"]["mrr"] == 1.0
    # At k=1 dense misses q1; eve's chunk holds the same words and is never retrieved.
    at_one = {r["method"]: r for r in score(store, encode, questions, {"a": "pa", "b": "pb"}, k=1)}
    assert at_one["dense"]["recall_at_8"] == 0.5 and at_one["lexical"]["recall_at_8"] == 1.0


def test_the_command_refuses_an_unknown_method() -> None:
    result = CliRunner().invoke(bench, ["lookup", "--methods", "dense,magic"])
    assert result.exit_code != 0 and "choose from" in result.output


def test_json_rows_are_one_object_per_method(monkeypatch: pytest.MonkeyPatch) -> None:
    import copilot.bench.lookup as lookup

    rows = [{"method": m, "recall_at_8": 0.5, "mrr": 0.25} for m in ("dense", "lexical", "hybrid")]
    monkeypatch.setattr(lookup, "run", lambda settings, methods, log: (rows, {}))
    result = CliRunner().invoke(bench, ["lookup", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == rows
