"""Follow-up questions made self-contained for retrieval (no LLM call), the fused search, and the follow-up
benchmark on a tiny store."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from copilot.bench.cli import bench
from copilot.bench.followups import FOLLOWUP_SET, METHODS, Pair, fuse_rankings, load_pairs, score
from copilot.followups import follow_up, is_follow_up, subject_of, subject_terms
from copilot.types import Paper, RetrievedItem

DIM = 8


@pytest.mark.parametrize("question", ["And what are its limitations?", "How is it trained?", "Why?",
                                      "What do they compare this method with?", "what about the datasets",
                                      "Also, the baselines?"])
def test_questions_that_point_back_are_follow_ups(question: str) -> None:
    assert is_follow_up(question)


@pytest.mark.parametrize("question", ["How is SPECTER trained?", "What does S2ORC contain in full text?",
                                      "Which GPU was used to train SPECTER?"])
def test_questions_that_name_their_subject_stand_alone(question: str) -> None:
    assert not is_follow_up(question)
    assert follow_up(question, ["What is S2ORC?"]) is None


def test_the_subject_is_named_by_the_latest_question_that_stands_alone() -> None:
    assert subject_terms("How is SPECTER trained?") == ["specter"], "the name, not the predicate"
    assert subject_terms("How does the literature graph link entities?") == ["literature", "graph", "link",
                                                                             "entities"]
    chain = ["What is S2ORC?", "How many papers does it contain?", "And how many citation links?"]
    assert subject_of(chain) == "What is S2ORC?"
    assert subject_of(["How is it built?", "Why?"]) == "How is it built?", "the oldest when all point back"
    found = follow_up("What are its limitations?", chain)
    assert found is not None and found.terms == ("s2orc",)
    assert found.query == "What are its limitations? s2orc" and found.subject == "What is S2ORC?"
    assert follow_up("What are its limitations?", []) is None, "nothing before it: searched for as asked"
    assert follow_up("Is it new?", ["Is it new?"]) is None, "nothing to carry"


def test_fused_rankings_keep_what_either_ranks_high() -> None:
    def ranking(*ids: int) -> list:
        return [(RetrievedItem("chunk", i, f"c{i}", 0.5), np.zeros(DIM, dtype=np.float32)) for i in ids]

    fused = [item.id for item, _ in fuse_rankings(ranking(1, 2, 3), ranking(4, 3, 5))]
    assert fused[0] == 3, "found by both"
    assert set(fused) == {1, 2, 3, 4, 5} and fused.index(1) < fused.index(2) and fused.index(4) < fused.index(5)


def test_the_follow_up_set_points_back_at_one_paper_each() -> None:
    pairs = load_pairs()
    assert 20 <= len(pairs) <= 40 and len({p.id for p in pairs}) == len(pairs)
    assert len({p.paper for p in pairs}) == 4 and FOLLOWUP_SET.name == "followups.jsonl"
    assert sum(is_follow_up(p.follow_up) for p in pairs) >= 0.9 * len(pairs)
    assert not any(is_follow_up(p.first) for p in pairs), "each first question names its subject"


@pytest.fixture
def tiny(open_store):  # noqa: ANN001, ANN201 - a store with two papers and the questions' vectors
    store = open_store()
    store.papers.add_many([Paper("pa", title="A", user_id="lookup"), Paper("pb", title="B", user_id="lookup")])
    eye = np.eye(DIM, dtype=np.float32)
    texts = [("pa", "Zorblat is trained on citation triples.", eye[0]),
             ("pa", "The training ran on one Titan V GPU.", eye[1]),
             ("pb", "Quuxcorp trains on a Titan V GPU as well, for ten days.", eye[2]),
             ("pb", "Quuxcorp holds 81.1M papers.", eye[3])]
    store.insert_with_vectors("chunks", [{"paper_id": p, "seq": i, "section": "Body", "text": t, "page_start": 1,
                                          "page_end": 1, "n_tokens": 10} for i, (p, t, _) in enumerate(texts)],
                              np.stack([v for _, _, v in texts]))
    pair = Pair("z1", "a", "How is Zorblat trained?", "On what GPU was it trained?", "Titan V GPU")
    # Dense alone points the follow-up at the other paper's GPU chunk; with the subject, at Zorblat's.
    vectors = {pair.first: eye[0], pair.follow_up: eye[2] + 0.2 * eye[1],
               f"{pair.follow_up} zorblat": eye[1] + 0.5 * eye[0]}
    return store, (lambda text: vectors[text] / np.linalg.norm(vectors[text])), [pair]


def test_score_finds_the_follow_up_with_its_subject(tiny) -> None:  # noqa: ANN001
    store, encode, pairs = tiny
    rows = {r["method"]: r for r in score(store, encode, pairs, {"a": "pa"}, METHODS, k=2)}
    assert set(rows) == set(METHODS) and all(r["rewritten"] == 1 for r in rows.values())
    assert rows["subject terms"]["recall_at_5"] == 1.0 and rows["subject terms"]["share_at_5"] > 0
    assert rows["alone + subject terms"]["paper_at_5"] == 1.0
    assert rows["alone"]["share_at_5"] < rows["subject terms"]["share_at_5"]


def test_json_rows_are_one_object_per_method(monkeypatch: pytest.MonkeyPatch) -> None:
    import copilot.bench.followups as followups

    rows = [{"method": m, "recall_at_5": 0.5, "paper_at_5": 1.0, "share_at_5": 0.6, "rewritten": 2} for m in METHODS]
    seen = {}
    monkeypatch.setattr(followups, "run", lambda settings, limit, log: seen.update(limit=limit) or (rows, {}))
    result = CliRunner().invoke(bench, ["followups", "--json", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == rows and seen == {"limit": 2}


@pytest.mark.slow
def test_the_benchmark_runs_on_a_tiny_subset_of_the_real_papers() -> None:
    from copilot.bench.followups import markdown, run
    from copilot.config import Settings, apply_offline_defaults

    settings = Settings()
    apply_offline_defaults(settings)
    rows, about = run(settings, limit=2)
    assert about["pairs"] == 2 and about["papers"] == 1 and [r["method"] for r in rows] == list(METHODS)
    assert all(0.0 <= r["recall_at_5"] <= 1.0 for r in rows) and "| alone |" in markdown(rows, about)


def test_a_pronoun_inside_a_self_contained_question_does_not_make_it_a_follow_up() -> None:
    from copilot.bench.followups import detection

    assert not is_follow_up("What does S2ORC contain and how big is it?")
    assert not is_follow_up("What learning rate did they train SPECTER with?")
    assert not is_follow_up("How does SPECTER use its citation graph?")
    assert is_follow_up("How big is it?") and is_follow_up("Is it better than SciBERT?")
    assert is_follow_up("On what GPU was it trained?") and is_follow_up("Why is that?")
    found = detection()
    assert found["self_contained"] >= 20 and found["follow_ups"] >= 30
    assert found["follow_up_rate"] >= 0.9 and found["false_follow_up_rate"] <= 0.1, found
