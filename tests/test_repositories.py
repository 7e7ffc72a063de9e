"""The repositories of the store: typed records, the visibility rules, provenance, and metadata changes reported
to the vector index inside the transaction that makes them."""

from __future__ import annotations


import numpy as np
import pytest

from copilot.storage import Store
from copilot.types import Chunk, Paper, PaperSummary, ThoughtSource, VectorFilter
from tests.test_store import unit




def chunk(paper_id: str, seq: int, section: str = "Introduction") -> Chunk:
    text = f"{paper_id} chunk {seq}"
    return Chunk(paper_id, seq, section, text, 1, 1, 0, len(text), 3)


@pytest.fixture
def library(store: Store) -> dict[str, list[int]]:
    """A shared arXiv paper and one upload each of ada and bob, with two chunks each."""
    store.papers.add_many([
        Paper("2004.07180", source="arxiv", arxiv_id="2004.07180", title="SPECTER", authors=["Arman Cohan"],
              categories=["cs.CL"], meta={"primary_category": "cs.CL"}, added_at="2026-01-01"),
        Paper("pdf-ada", user_id="ada", source="upload", title="Ada's draft", sections=[{"title": "Intro"}],
              references=["[1] A reference."], warnings=["no abstract"], added_at="2026-01-02"),
        Paper("pdf-bob", user_id="bob", source="upload", title="Bob's draft", added_at="2026-01-03"),
    ])
    ids = {}
    for i, paper_id in enumerate(("2004.07180", "pdf-ada", "pdf-bob")):
        ids[paper_id] = store.chunks.add([chunk(paper_id, 0, "Abstract"), chunk(paper_id, 1)], unit(i, 2))
    return ids


def thought(store: Store, user: str, seed: int, *, public: bool = False, sources=()) -> int:  # noqa: ANN001
    return store.thoughts.add(user_id=user, text=f"thought {seed} of {user}", confidence=0.8, depth=1,
                              public=public, vector=unit(100 + seed)[0], sources=list(sources))


# ----- papers and chunks -------------------------------------------------------------------------------


def test_a_paper_reads_back_as_it_was_written(store: Store, library: dict[str, list[int]]) -> None:
    paper = store.papers.get("pdf-ada")
    assert isinstance(paper, Paper)
    assert (paper.title, paper.sections, paper.references, paper.warnings) == (
        "Ada's draft", [{"title": "Intro"}], ["[1] A reference."], ["no abstract"])
    assert paper.meta == {} and paper.authors == [] and paper.n_chunks == 2 and not paper.shared
    shared = store.papers.get("2004.07180")
    assert shared.shared and shared.authors == ["Arman Cohan"] and shared.meta["primary_category"] == "cs.CL"
    assert store.papers.exists("pdf-bob") and not store.papers.exists("nope")


def test_shared_papers_are_everyones_and_uploads_their_owners(store: Store, library: dict[str, list[int]]) -> None:
    listing = store.papers.visible("ada")
    assert all(isinstance(p, PaperSummary) for p in listing)
    assert [p.id for p in listing] == ["2004.07180", "pdf-ada"], "in the order they were added"
    assert [p.id for p in store.papers.visible("carol")] == ["2004.07180"]
    assert [p.id for p in store.papers.visible()] == ["2004.07180", "pdf-ada", "pdf-bob"], "no user: every paper"
    assert listing[0].n_chunks == 2 and listing[0].authors == ["Arman Cohan"]
    assert store.papers.get("pdf-bob", "ada") is None, "another user's upload is invisible"
    assert store.papers.get("pdf-bob", "bob").id == "pdf-bob"
    assert store.papers.get("2004.07180", "carol").id == "2004.07180"


def test_a_chunk_is_visible_when_its_paper_is(store: Store, library: dict[str, list[int]]) -> None:
    bobs = library["pdf-bob"][1]
    assert store.chunks.visible(bobs, "ada") is None
    seen = store.chunks.visible(bobs, "bob")
    assert seen.paper_title == "Bob's draft" and seen.text == "pdf-bob chunk 1" and seen.id == bobs
    assert store.chunks.visible(library["2004.07180"][0], "ada").paper_title == "SPECTER"
    assert store.chunks.visible(9999, "ada") is None


def test_chunks_read_in_order_with_vectors_when_asked(store: Store, library: dict[str, list[int]]) -> None:
    plain = store.chunks.of_paper("pdf-ada")
    assert [c.seq for c in plain] == [0, 1] and all(c.vector is None for c in plain)
    with_vectors = store.chunks.of_paper("pdf-ada", vectors=True)
    assert np.allclose(with_vectors[1].vector, unit(1, 2)[1])
    both = store.chunks.of_papers(["pdf-bob", "pdf-ada"])
    assert [c.paper_id for c in both] == ["pdf-bob", "pdf-bob", "pdf-ada", "pdf-ada"], "papers as asked"
    got = store.chunks.get_many(library["pdf-ada"][::-1])
    assert [c.id for c in got] == library["pdf-ada"] and got[0].paper_title == "Ada's draft"
    assert store.chunks.vectors(library["pdf-ada"]).shape == (2, 8)
    assert store.chunks.vectors([]).shape[0] == 0


def test_removing_a_paper_flags_the_thoughts_built_on_it(store: Store, library: dict[str, list[int]]) -> None:
    chunk_ids = library["pdf-ada"]
    built = thought(store, "ada", 1, sources=[ThoughtSource("chunk", chunk_ids[1])])
    other = thought(store, "ada", 2, sources=[ThoughtSource("chunk", library["2004.07180"][1])])
    with store.transaction():
        assert store.thoughts.flag_built_on(chunk_ids) == 1
        assert store.chunks.delete(chunk_ids) == 2
        assert store.papers.delete("pdf-ada")
    assert store.thoughts.get(built).flagged and not store.thoughts.get(other).flagged
    assert store.papers.get("pdf-ada") is None and store.chunks.of_paper("pdf-ada") == []
    assert store.thoughts.flag_built_on([]) == 0
    assert store.count("thoughts", VectorFilter(owner="ada", unflagged=True)) == 1


# ----- thoughts and provenance -------------------------------------------------------------------------


def test_thoughts_are_their_owners_and_public_ones_readable_when_asked(store: Store) -> None:
    private = thought(store, "ada", 1)
    shared = thought(store, "ada", 2, public=True)
    bobs = thought(store, "bob", 3)
    assert [t.id for t in store.thoughts.list("ada")] == [private, shared]
    assert [t.id for t in store.thoughts.list()] == [private, shared, bobs]
    assert store.thoughts.visible(private, "bob") is None, "another user's thought is invisible"
    assert store.thoughts.visible(shared, "bob").public, "a public thought may be read by everyone"
    assert store.thoughts.visible(bobs, "bob").user_id == "bob"
    assert store.thoughts.visible(bobs, None).id == bobs
    assert store.thoughts.visible(9999, "bob") is None
    # Retrieval sees the public pool only when it asks for it.
    assert store.count("thoughts", VectorFilter(owner="bob")) == 1
    assert store.count("thoughts", VectorFilter(owner="bob", public=True)) == 2
    as_dict = store.thoughts.get(shared).to_dict()
    assert as_dict["public"] == 1 and as_dict["flagged"] == 0 and "sources" not in as_dict


def test_provenance_edges(store: Store, library: dict[str, list[int]]) -> None:
    a_chunk, b_chunk = library["2004.07180"][1], library["pdf-ada"][1]
    first = thought(store, "ada", 1, sources=[ThoughtSource("chunk", a_chunk), ThoughtSource("chunk", a_chunk)])
    second = thought(store, "ada", 2, sources=[ThoughtSource("thought", first), ThoughtSource("chunk", b_chunk)])
    store.thoughts.add_sources(second, [ThoughtSource("thought", second), ThoughtSource("chunk", b_chunk)])
    assert store.thoughts.sources(first) == [ThoughtSource("chunk", a_chunk)], "an edge is kept once"
    assert store.thoughts.get(second, sources=True).sources == [
        ThoughtSource("chunk", b_chunk), ThoughtSource("thought", first)], "by kind, then id; never itself"
    assert store.thoughts.sources_of([first, second, 9999])[9999] == []
    assert sorted(store.thoughts.papers_behind(second)) == ["2004.07180", "pdf-ada"], "through thoughts too"
    assert store.thoughts.get(second, sources=True).to_dict()["sources"] == [
        {"kind": "chunk", "id": b_chunk}, {"kind": "thought", "id": first}]

    assert store.thoughts.delete(first)
    assert store.thoughts.sources(second) == [ThoughtSource("chunk", b_chunk)], "edges to a deleted thought go"
    assert store.thoughts.get(first) is None and not store.thoughts.delete(first)
    assert store.check_consistency()["thoughts"]


def test_metadata_changes_are_reported_inside_their_transaction(store: Store, library: dict[str, list[int]],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    target = thought(store, "ada", 1, sources=[ThoughtSource("chunk", library["pdf-ada"][1])])
    calls = []
    monkeypatch.setattr(store, "meta_changed",
                        lambda kind, ids: calls.append((kind, list(ids), store.conn.in_transaction)))
    assert store.thoughts.set_confidence(target, 0.4)
    assert store.thoughts.get(target).confidence == pytest.approx(0.4)
    store.thoughts.merge(target, support=2, confidence=0.9, depth=1, sources=[])
    store.thoughts.merge(target, support=3, confidence=0.95, depth=2, sources=[], text="a better text",
                         vector=unit(7)[0])
    # the merge that changes the text writes the vector, which carries the new metadata itself: no second report
    assert [i for i, _ in store.search("thoughts", unit(7)[0], 1, VectorFilter(owner="ada", min_confidence=0.95))] \
        == [target]
    store.thoughts.flag_built_on(library["pdf-ada"])
    assert calls == [("thoughts", [target], True)] * 3
    merged = store.thoughts.get(target)
    assert (merged.support, merged.depth, merged.text, merged.flagged) == (3, 2, "a better text", True)
    assert not store.thoughts.set_confidence(9999, 0.5) and len(calls) == 3, "nothing changed, nothing reported"
    assert store.count("thoughts", VectorFilter(owner="ada", min_confidence=0.9)) == 1


def test_thought_counts_and_footprint(store: Store) -> None:
    thought(store, "ada", 1)
    thought(store, "ada", 2)
    thought(store, "bob", 3)
    assert store.thoughts.count_by_depth("ada") == {1: 2} and store.thoughts.count_by_depth() == {1: 3}
    size, count = store.thoughts.footprint("ada")
    assert count == 2 and size == len("thought 1 of ada") + len("thought 2 of ada") + 2 * 8 * 4


# ----- the user's own records --------------------------------------------------------------------------


def test_memories_are_only_their_owners(store: Store) -> None:
    ada = store.memories.add("ada", "I work on citation graphs.", unit(1))
    bob = store.memories.add("bob", "I prefer short answers.", unit(2))
    assert [m.text for m in store.memories.list("ada")] == ["I work on citation graphs."]
    assert store.memories.get_many([ada, bob], "ada") == store.memories.list("ada"), "bob's memory is invisible"
    assert not store.memories.delete(bob, "ada") and store.memories.list("bob")[0].id == bob
    assert store.memories.delete(bob, "bob") and store.memories.list("bob") == []
    assert store.check_consistency()["memories"]


def test_queries_and_feedback_are_their_askers(store: Store) -> None:
    query_id = store.queries.add("ada", "What is SPECTER?", "An embedder [1].",
                                 [{"kind": "chunk", "id": 1, "depth": 0}], {"retrieve_ms": 1.0})
    pending = store.queries.get(query_id, "ada")
    assert pending.thought_outcome == "pending" and pending.llm_calls == 1 and pending.retrieved[0]["id"] == 1
    assert store.queries.get(query_id, "bob") is None, "another user's answer is invisible"
    store.queries.record_outcome(query_id, thought_id=7, outcome="added", reason="", timings={"thought_ms": 2.0},
                                 llm_calls=2)
    done = store.queries.get(query_id)
    assert (done.thought_id, done.thought_outcome, done.timings, done.llm_calls) == (7, "added", {"thought_ms": 2.0}, 2)
    assert store.queries.retrieved("ada") == [[{"kind": "chunk", "id": 1, "depth": 0}]]
    assert store.queries.retrieved("bob") == []
    store.queries.add_feedback(query_id, "ada", 1)
    store.queries.add_feedback(query_id, "ada", -1)
    assert [f.value for f in store.queries.feedback("ada")] == [1, -1] and store.queries.feedback("bob") == []


def test_profiles_follows_refreshes_and_eval_runs(store: Store) -> None:
    assert store.profiles.get("ada") is None
    store.profiles.save("ada", "A researcher on graphs.", "manual")
    saved = store.profiles.save("ada", "A researcher on summaries.", "text")
    assert (saved.persona, saved.source) == ("A researcher on summaries.", "text") and store.profiles.get("bob") is None
    assert saved.answer_language is None
    assert store.profiles.save_language("ada", "Deutsch").persona == "A researcher on summaries."
    assert store.profiles.save("ada", "A researcher on graphs.", "manual").answer_language == "Deutsch"
    alone = store.profiles.save_language("cy", "Français")
    assert (alone.persona, alone.answer_language) == ("", "Français") and store.profiles.get("bob") is None

    store.follows.replace("ada", ["cs.IR", "cs.CL"])
    store.follows.replace("bob", ["stat.ML"])
    store.follows.replace("ada", ["cs.CL", "cs.IR"])
    assert store.follows.of("ada") == ["cs.CL", "cs.IR"] and store.follows.categories() == ["cs.CL", "cs.IR", "stat.ML"]

    assert store.refreshes.last() is None
    mine = store.refreshes.add(user_id="ada", categories=["cs.CL"], added=["2004.07180"], skipped=1, errors=[],
                               started_at="t0", finished_at="t1")
    assert store.refreshes.last("bob") is None, "a user's own refresh is theirs"
    last = store.refreshes.last("ada")
    assert (last.id, last.added, last.n_added, last.skipped) == (mine, ["2004.07180"], 1, 1)
    everyone = store.refreshes.add(user_id=None, categories=["cs.CL"], added=[], skipped=0, errors=["x: failed"],
                                   started_at="t2", finished_at="t3")
    assert store.refreshes.last("bob").id == everyone == store.refreshes.last("ada").id, "scheduled: everyone's"

    first = store.eval_runs.add(task="claims", methods=["dense", "bm25"], started_at="t0", finished_at="t1",
                                path="runs/1", report={"primary_metric": "f1"})
    store.eval_runs.add(task="qa", methods=["dense"], started_at="t2", finished_at="t3", path="runs/2", report={})
    (claims,) = store.eval_runs.list("claims")
    assert (claims.id, claims.methods, claims.report) == (first, ["dense", "bm25"], {"primary_metric": "f1"})
    assert [r.task for r in store.eval_runs.list()] == ["claims", "qa"]


def test_requests_racing_past_a_limit_are_admitted_up_to_it(store: Store) -> None:
    """Check and record are one step per user: eight threads asking at once get exactly the limit between them."""
    import threading

    results: list[int | None] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        for _ in range(3):
            results.append(store.usage.admit("ada", "question", limit=10, window_s=60))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 10 and store.usage.count_since("ada", "question", 60) == 10
    assert store.usage.admit("bob", "question", limit=10, window_s=60) is None, "another user has their own"


def test_a_refund_takes_back_only_the_latest_uses_of_that_user_and_action(store: Store) -> None:
    assert store.usage.admit("ada", "compare_cell", limit=10, window_s=60, amount=6) is None
    store.usage.record("ada", "question", 2)
    store.usage.record("bob", "compare_cell", 3)
    store.usage.refund("ada", "compare_cell", 4)
    store.usage.refund("ada", "compare_cell", 0)
    assert store.usage.count_since("ada", "compare_cell", 60) == 2
    assert store.usage.count_since("ada", "question", 60) == 2
    assert store.usage.count_since("bob", "compare_cell", 60) == 3
    store.usage.refund("ada", "compare_cell", 5)  # more than were counted: none left, nothing else touched
    assert store.usage.count_since("ada", "compare_cell", 60) == 0
    assert store.usage.count_since("ada", "question", 60) == 2
