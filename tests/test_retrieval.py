"""Mixed retrieval over chunks and thoughts: scoping, dedup above 0.85, K and the token budget."""

import numpy as np
import pytest

from copilot.retrieval import fuse, pack_context, retrieve_mixture
from copilot.storage import Store
from copilot.types import Paper, RetrievedItem

DIM = 16


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def near(base: np.ndarray, cos: float, seed: int) -> np.ndarray:
    """A unit vector with cosine ``cos`` to ``base``."""
    other = np.random.default_rng(seed).normal(size=DIM)
    other -= other @ base * base
    other = unit(other)
    return unit(cos * base + np.sqrt(1 - cos**2) * other)


@pytest.fixture
def store(open_store) -> Store:  # noqa: ANN001 - on each backend
    s = open_store()
    s.papers.add_many([Paper("p1", title="Paper One"), Paper("p2", title="Paper Two")])
    return s


def add_chunk(store: Store, paper: str, vector: np.ndarray, text: str, n_tokens: int = 10) -> int:
    return store.insert_with_vectors("chunks", [{"paper_id": paper, "seq": 0, "section": "Intro", "text": text,
                                                 "page_start": 1, "page_end": 2, "n_tokens": n_tokens}], vector[None])[0]


def add_thought(store: Store, user: str, vector: np.ndarray, text: str, confidence: float = 0.8, public: int = 0,
                flagged: int = 0, depth: int = 1) -> int:
    return store.insert_with_vectors("thoughts", [{"user_id": user, "text": text, "confidence": confidence,
                                                   "public": public, "flagged": flagged, "depth": depth}],
                                     vector[None])[0]


def test_mixture_scopes_thoughts(store: Store) -> None:
    q = unit(np.eye(DIM)[0])
    c1 = add_chunk(store, "p1", near(q, 0.9, 1), "chunk one")
    mine = add_thought(store, "ada", near(q, 0.95, 2), "my thought", depth=2)
    other = add_thought(store, "bob", near(q, 0.97, 3), "bob's private thought")
    public = add_thought(store, "bob", near(q, 0.6, 4), "bob's public thought", public=1)
    add_thought(store, "ada", near(q, 0.99, 5), "weak thought", confidence=0.2)
    add_thought(store, "ada", near(q, 0.98, 6), "flagged thought", flagged=1)
    got = retrieve_mixture(store, q, user_id="ada", k=8, min_confidence=0.5)
    assert [(i.kind, i.id) for i, _ in got] == [("thought", mine), ("chunk", c1)]
    assert got[0][0].depth == 2 and got[0][0].confidence == pytest.approx(0.8)
    assert got[1][0].paper_title == "Paper One" and got[1][0].label == "Paper One, Intro, pp. 1-2"
    with_public = retrieve_mixture(store, q, user_id="ada", include_public=True)
    assert ("thought", public) in [(i.kind, i.id) for i, _ in with_public]
    assert ("thought", other) not in [(i.kind, i.id) for i, _ in with_public]
    assert [i.kind for i, _ in retrieve_mixture(store, q, user_id="ada", include_thoughts=False)] == ["chunk"]


def test_paper_subset(store: Store) -> None:
    q = unit(np.eye(DIM)[1])
    add_chunk(store, "p1", near(q, 0.9, 7), "one")
    c2 = add_chunk(store, "p2", near(q, 0.5, 8), "two")
    got = retrieve_mixture(store, q, user_id="ada", paper_ids=["p2"])
    assert [i.id for i, _ in got] == [c2]


def test_chunks_of_another_users_upload_are_never_retrieved(store: Store) -> None:
    q = unit(np.eye(DIM)[3])
    store.papers.add_many([Paper("pdf-bob", title="Bob's upload", user_id="bob"),
                           Paper("pdf-ada", title="Ada's upload", user_id="ada")])
    shared = add_chunk(store, "p1", near(q, 0.5, 13), "shared")
    bobs = add_chunk(store, "pdf-bob", near(q, 0.99, 14), "bob's")
    adas = add_chunk(store, "pdf-ada", near(q, 0.9, 15), "ada's")
    assert [i.id for i, _ in retrieve_mixture(store, q, user_id="ada")] == [adas, shared]
    assert [i.id for i, _ in retrieve_mixture(store, q, user_id="ada", paper_ids=["pdf-bob", "p1"])] == [shared]
    assert [i.id for i, _ in retrieve_mixture(store, q, user_id="bob")] == [bobs, shared]


def test_pack_skips_near_duplicates_and_respects_k_and_budget(store: Store) -> None:
    q = unit(np.eye(DIM)[2])
    a = near(q, 0.9, 10)
    dup = near(a, 0.9, 11)  # cosine 0.9 > 0.85 to a
    distinct = near(q, 0.7, 12)
    ids = [add_chunk(store, "p1", v, f"text {i}", n_tokens=t)
           for i, (v, t) in enumerate([(a, 100), (dup, 100), (distinct, 100)])]
    candidates = retrieve_mixture(store, q, user_id="ada")
    packed = pack_context(candidates, k=8, budget_tokens=2000, dedup_threshold=0.85)
    assert [i.id for i in packed.items] == [ids[0], ids[2]]
    assert packed.skipped_duplicates == 1 and packed.tokens == 200
    assert [i.id for i in pack_context(candidates, k=1).items] == [ids[0]]
    tight = pack_context(candidates, budget_tokens=150)
    assert [i.id for i in tight.items] == [ids[0]] and tight.skipped_budget == 1
    counted = pack_context(candidates, count_tokens=lambda text: 5)
    assert counted.tokens == 10


# ----- lexical and hybrid retrieval ----------------------------------------------------------------------------

def test_hybrid_finds_the_passage_that_holds_the_questions_rare_word(store: Store) -> None:
    q = unit(np.eye(DIM)[4])
    decoys = [add_chunk(store, "p1", near(q, 0.9 - 0.05 * i, 20 + i), f"a passage about models number {i}")
              for i in range(4)]
    answer = add_chunk(store, "p2", near(q, 0.1, 30), "XAI stands for Explainable Artificial Intelligence.")
    question = "What does XAI stand for?"

    def packed(**options) -> list[int]:  # noqa: ANN003
        candidates = retrieve_mixture(store, q, user_id="ada", k=3, **options)
        return [i.id for i in pack_context(candidates, k=3).items]

    assert answer not in packed(query_text=question, mode="dense")
    assert packed(query_text=question, mode="dense") == packed() == packed(mode="hybrid") == decoys[:3]
    assert packed(query_text=question, mode="lexical") == [answer]  # only it holds a word of the question
    for fusion in ("rrf", "weighted"):
        assert answer in packed(query_text=question, mode="hybrid", fusion=fusion)
    found = retrieve_mixture(store, q, user_id="ada", query_text=question, mode="lexical")
    assert found[0][0].recalled_by == "words"
    assert found[0][0].score == pytest.approx(float(near(q, 0.1, 30) @ q), abs=1e-5)  # its cosine, as dense gives


def test_lexical_retrieval_keeps_the_scope(store: Store) -> None:
    q = unit(np.eye(DIM)[5])
    store.papers.add_many([Paper("pdf-bob", title="Bob's upload", user_id="bob")])
    shared = add_chunk(store, "p1", near(q, 0.5, 40), "zeolite catalysts shared")
    add_chunk(store, "pdf-bob", near(q, 0.9, 41), "zeolite catalysts bob")
    mine = add_thought(store, "ada", near(q, 0.5, 42), "zeolite thought of ada")
    add_thought(store, "bob", near(q, 0.9, 43), "zeolite thought of bob")
    public = add_thought(store, "bob", near(q, 0.4, 44), "zeolite public thought", public=1)
    add_thought(store, "ada", near(q, 0.9, 45), "zeolite flagged", flagged=1)
    for mode in ("lexical", "hybrid"):
        got = {(i.kind, i.id) for i, _ in retrieve_mixture(store, q, user_id="ada", query_text="zeolite", mode=mode)}
        assert got == {("chunk", shared), ("thought", mine)}, mode
        wider = retrieve_mixture(store, q, user_id="ada", query_text="zeolite", mode=mode, include_public=True)
        assert {(i.kind, i.id) for i, _ in wider} == {("chunk", shared), ("thought", mine), ("thought", public)}
        only_chunks = retrieve_mixture(store, q, user_id="ada", query_text="zeolite", mode=mode,
                                       include_thoughts=False)
        assert [i.id for i, _ in only_chunks] == [shared]


def test_fused_order() -> None:
    from copilot.retrieval import fused_order

    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    lexical = [("c", 12.0), ("b", 3.0)]
    # RRF: c = 1/63 + 1/61 (0.032266) just beats b = 2/62 (0.032258); a = 1/61 alone comes last.
    assert fused_order([dense, lexical]) == ["c", "b", "a"]
    # Weighted, half each (normalised): a = 0.5, b = 0.5·0.875 + 0.5·0 = 0.4375, c = 0 + 0.5 (after a: a tie).
    assert fused_order([dense, lexical], fusion="weighted", weights=(0.5, 0.5)) == ["a", "c", "b"]
    # The default lexical share 0.7: c = 0.7, a = 0.3, b = 0.3·0.875 = 0.2625.
    assert fused_order([dense, lexical], fusion="weighted") == ["c", "a", "b"]
    assert fused_order([dense, []]) == ["a", "b", "c"] and fused_order([[], []]) == []


def test_settings_choose_the_retrieval(monkeypatch: pytest.MonkeyPatch) -> None:
    from copilot.config import Settings
    from copilot.retrieval import retrieval_options

    assert retrieval_options(Settings())["mode"] == "hybrid"
    monkeypatch.setenv("COPILOT_RETRIEVAL", "lexical")
    monkeypatch.setenv("COPILOT_RETRIEVAL_FUSION", "weighted")
    monkeypatch.setenv("COPILOT_RETRIEVAL_LEXICAL_WEIGHT", "0.25")
    assert retrieval_options(Settings()) == {"mode": "lexical", "fusion": "weighted", "lexical_weight": 0.25}


def test_the_defaults_of_retrieve_mixture_are_the_settings_defaults() -> None:
    import inspect

    from copilot.config import Settings
    from copilot.retrieval import retrieval_options

    parameters = inspect.signature(retrieve_mixture).parameters
    assert {name: parameters[name].default for name in ("mode", "fusion", "lexical_weight")} == \
        retrieval_options(Settings())


def test_a_thoughts_words_are_weighed_among_thoughts_not_against_chunks() -> None:
    """BM25 of a memory of one thought is near zero for every term (a tiny IDF); fused with the chunks' BM25 as one
    list, a thought holding every word of the question would rank last. Each kind is fused on its own."""
    unit = np.eye(4, dtype=np.float32)
    chunks = [(RetrievedItem("chunk", i, f"chunk {i}", 0.5 - 0.05 * i), unit[i % 4]) for i in range(4)]
    thought = (RetrievedItem("thought", 9, "the literature graph links papers", 0.45), unit[0])
    dense = [*chunks[:2], thought, *chunks[2:]]
    lexical = [(item, vector, bm25) for (item, vector), bm25 in zip(chunks, (9.0, 7.0, 5.0, 3.0), strict=True)]
    lexical.append((thought[0], thought[1], 1e-6))
    order = [(item.kind, item.id) for item, _ in fuse(dense, lexical, fusion="weighted", lexical_weight=0.7)]
    # The only lexical thought, close by embedding, goes before the chunks weaker on both sides; a single hit says
    # nothing of how well it matches, so it does not take the lexical side's whole weight.
    assert order.index(("thought", 9)) == 2, order
