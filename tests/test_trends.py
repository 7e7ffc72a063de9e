"""Trend keywords and research ideas: deterministic keywords, cited ideas, persona, visibility. The real model writes
ideas in the browser walk (``tests/test_browser.py``)."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from copilot.engine import Copilot
from copilot.tasks.profile import save_profile
from copilot.tasks.trends import Idea, extract_keywords, parse_ideas, phrases, trends_and_ideas
from copilot.tasks.writing import Citation, DraftError
from tests.library_support import add_paper, make_copilot
from tests.scripted_llm import ScriptedLLM

PAPERS = {
    "graph": ("Construction of the Literature Graph in Semantic Scholar", "2018-06-01",
              "We build a literature graph of papers, authors and entities. The literature graph powers Semantic "
              "Scholar search and links entity mentions to knowledge bases."),
    "2004.07180": ("SPECTER: Document-level Representation Learning using Citation-informed Transformers",
                   "2020-04-15", "SPECTER learns document embeddings from the citation graph. The embeddings "
                   "improve paper recommendation and citation prediction on the literature graph of Semantic "
                   "Scholar."),
    "1911.02782": ("S2ORC: The Semantic Scholar Open Research Corpus", "2019-11-07",
                   "S2ORC is a corpus of academic papers with full text and citation links from Semantic Scholar, "
                   "for text mining and citation recommendation."),
}


@pytest.fixture
def copilot(tmp_path: Path, llm: ScriptedLLM) -> Copilot:
    c = make_copilot(tmp_path, llm)
    for paper_id, (title, published, abstract) in PAPERS.items():
        add_paper(c, paper_id, title, abstract=abstract, published=published, arxiv_id=paper_id[0].isdigit()
                  and paper_id or None, sections=[("Introduction", abstract)], authors=["A. Author"])
    add_paper(c, "pdf-ada", "Ada's private draft on protein folding", abstract="Protein folding with diffusion.",
              sections=[("Introduction", "Protein folding with diffusion models.")], user_id="ada",
              added_at="2026-02-01T00:00:00+00:00")
    yield c
    c.store.close()


def test_phrases_never_cross_stop_words_or_punctuation() -> None:
    found = phrases("Learning of representations, with citation-informed transformers (SPECTER) in 2020.")
    assert "learning representations" not in found and "transformers specter" not in found
    assert {"citation-informed transformers", "specter", "representations"} <= set(found)
    assert not any(w in found for w in ("of", "with", "in", "2020"))


def test_keywords_are_shared_phrases_and_do_not_depend_on_scikit_learn(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"{title}. {abstract}" for title, _, abstract in PAPERS.values()]
    keywords = extract_keywords(texts)
    assert {"semantic scholar", "literature graph"} <= set(keywords[:3]), "phrases all three papers share lead"
    assert "graph" not in keywords, "a word inside a chosen phrase is redundant"
    assert len(keywords) == 8 and len(set(keywords)) == 8
    assert extract_keywords(texts) == keywords, "deterministic"
    real_import = builtins.__import__

    def no_sklearn(name: str, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    assert extract_keywords(texts) == keywords, "the counted fallback weighs phrases as scikit-learn does"
    assert extract_keywords([]) == [] and extract_keywords(["  "]) == []


def cites(ids: list[str], titles: list[str] | None = None) -> list[Citation]:
    """The papers shown with the ideas, numbered 1..n, as far as parsing needs them (id and title)."""
    return [Citation(n, pid, title, "", None, None)
            for n, (pid, title) in enumerate(zip(ids, titles or [""] * len(ids), strict=True), start=1)]


def test_parse_ideas_maps_citations_and_attaches_uncited_ideas_honestly() -> None:
    ids = ["p1", "p2", "p3"]
    reply = ("Here are some ideas:\n"
             "1. Combine citation graphs with text embeddings for recommendation [1][2].\n"
             "2. Evaluate embeddings on a new multilingual benchmark of papers [9].\n"
             "- Study how SPECTER embeddings drift as the literature grows over time.\n"
             "[2] Build a corpus of papers with full text and their citation contexts.\n"
             "3. Short one [1].\n"
             "4. Combine citation graphs with text embeddings for recommendation [1][2].\n")
    ideas = parse_ideas(reply, cites(ids, ["Graph paper", "Corpus paper", "SPECTER: Embeddings"]))
    assert ideas == [
        Idea("Combine citation graphs with text embeddings for recommendation [1][2].", ["p1", "p2"], True),
        Idea("Evaluate embeddings on a new multilingual benchmark of papers.", ids, False),
        Idea("Study how SPECTER [3] embeddings drift as the literature grows over time.", ["p3"], True),
        Idea("Build a corpus of papers with full text and their citation contexts. [2]", ["p2"], True),
    ]
    paragraph = ("Build a citation recommender from graph embeddings [2]. Measure how full text helps search "
                 "quality. Link entity mentions across papers to knowledge bases [1].")
    assert [i.paper_ids for i in parse_ideas(paragraph, cites(ids))] == [["p2"], ids, ["p1"]]
    many = "\n".join(f"Idea number {i} about graphs and papers [1]." for i in range(9))
    assert len(parse_ideas(many, cites(ids))) == 5


def test_trends_and_ideas(copilot: Copilot, llm: ScriptedLLM) -> None:
    llm.answers = ["1. Use literature graph embeddings to recommend papers [2].\n"
                   "2. Link entity mentions in full text to knowledge bases [3].\n"
                   "3. Measure how citation recommendation changes with corpus size."]
    trends = trends_and_ideas(copilot, user_id="bob", persona="I study citation recommendation.")
    assert [p["paper_id"] for p in trends.papers] == ["2004.07180", "1911.02782", "graph"], "newest first"
    assert [p["n"] for p in trends.papers] == [1, 2, 3] and trends.papers[0]["year"] == 2020
    assert trends.papers[0]["url"] == "https://arxiv.org/abs/2004.07180"
    assert {"semantic scholar", "literature graph"} <= set(trends.keywords)
    assert [(i.paper_ids, i.cited) for i in trends.ideas] == [
        (["1911.02782"], True), (["graph"], True), (["2004.07180", "1911.02782", "graph"], False)]
    assert trends.llm_calls == 1 and set(trends.timings) == {"keywords_ms", "ideas_ms", "total_ms"}
    prompt = "\n".join(m["content"] for m in llm.calls[0])
    assert "Researcher: I study citation recommendation." in prompt and "Trending topics: " in prompt
    assert "[1] SPECTER" in prompt and "protein" not in prompt.lower(), "another user's upload stays private"
    markdown = trends.to_markdown()
    assert "(cites [2])" in markdown and "(based on [1], [2], [3])" in markdown and "## Trending keywords" in markdown
    record = json.loads(json.dumps(trends.as_dict()))
    assert record["ideas"][2]["cited"] is False and record["persona"] == "I study citation recommendation."


def test_stored_persona_scope_and_errors(copilot: Copilot, llm: ScriptedLLM, tmp_path: Path) -> None:
    save_profile(copilot.store, "ada", "A biologist who folds proteins with diffusion models.", "manual")
    llm.answers = ["Fold proteins with citation graphs of papers [1]."]
    trends = trends_and_ideas(copilot, user_id="ada", persona=None, max_papers=2)
    assert trends.persona == "A biologist who folds proteins with diffusion models."
    assert len(trends.papers) == 2 and trends.papers[0]["paper_id"] == "pdf-ada", \
        "the paper closest to the persona is kept; the kept ones are shown newest first"
    assert any("usable idea" in note for note in trends.notes)
    llm.answers = ["Nothing."]
    scoped = trends_and_ideas(copilot, user_id="bob", persona=None, paper_ids=["graph"])
    assert [p["paper_id"] for p in scoped.papers] == ["graph"] and scoped.persona is None and scoped.ideas == []
    with pytest.raises(DraftError, match="pdf-ada"):
        trends_and_ideas(copilot, user_id="bob", persona=None, paper_ids=["pdf-ada"])
    empty = make_copilot(tmp_path / "empty", ScriptedLLM())
    with pytest.raises(DraftError, match="library is empty"):
        trends_and_ideas(empty, user_id="bob", persona=None)
    empty.store.close()


def test_ideas_numbered_inline_lose_the_next_number_and_repeat_once() -> None:
    from copilot.tasks.trends import parse_ideas

    reply = ("A scalable system for organizing scientific documents into a graph for search (e.g., Google) 2. "
             "A tool to help users find papers, authors and entities related to them 3. "
             "A scalable system for organizing scientific documents into a graph for search (e.g., Google)")
    ideas = parse_ideas(reply, cites(["p1", "p2"]))
    assert [i.text for i in ideas] == [
        "A scalable system for organizing scientific documents into a graph for search (e.g., Google)",
        "A tool to help users find papers, authors and entities related to them"]
