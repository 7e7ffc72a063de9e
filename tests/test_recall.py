"""Personal memories and thoughts recalled with the association score (switchable), never another user's."""

from pathlib import Path

import numpy as np
import pytest

from copilot.association import scoring
from copilot.association.scoring import message_parts
from copilot.config import Settings
from copilot.embeddings import Embedder, get_embedder
from copilot.engine import Copilot
from copilot.limits import LimitExceeded
from copilot.memories import FUSED_FROM, MEMORY_MIN_SCORE
from copilot.storage import Store
from copilot.types import VectorFilter
from copilot.ui.chat_tab import recalled_by
from tests.scripted_llm import ScriptedLLM

STATEMENTS = [
    "I have asthma, and damp winters always set it off.",
    "My camera-ready deadline for the ACL paper is on the 14th.",
    "I promised my daughter I would be home for her recital every Thursday.",
    "I prefer reading papers on paper, with a pencil.",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings())


def copilot_for(tmp_path: Path, embedder: Embedder, association: bool) -> Copilot:
    store = Store(tmp_path / "c.db", tmp_path / "i")
    return Copilot(Settings(association=association), store, embedder, ScriptedLLM())


def test_recall_uses_the_association_score(tmp_path: Path, embedder: Embedder) -> None:
    copilot = copilot_for(tmp_path, embedder, association=True)
    ids = [copilot.remember(s, user_id="ada") for s in STATEMENTS]
    copilot.remember("Bob's secret: he hates conferences.", user_id="bob")
    hits = copilot.recall("I'm exhausted, can you plan my week?", user_id="ada", k=4)
    assert {h["id"] for h in hits} == set(ids), "only Ada's memories, all of them"
    assert all(h["recalled_by"] == "association" for h in hits)
    vectors = embedder.encode_documents(STATEMENTS)
    expected = copilot.association.rank("I'm exhausted, can you plan my week?", vectors, k=4)
    assert [h["id"] for h in hits] == [ids[i] for i in expected], "same ranking as the combined score"
    assert copilot.recall("anything", user_id="carol") == []
    with pytest.raises(ValueError):
        copilot.remember("   ", user_id="ada")


def test_switching_association_off_gives_plain_cosine(tmp_path: Path, embedder: Embedder) -> None:
    copilot = copilot_for(tmp_path, embedder, association=False)
    ids = [copilot.remember(s, user_id="ada") for s in STATEMENTS]
    hits = copilot.recall("When is my deadline for the camera-ready?", user_id="ada", k=2)
    assert hits[0]["id"] == ids[1] and hits[0]["recalled_by"] == "embedding"
    q = embedder.encode_query("When is my deadline for the camera-ready?")
    assert hits[0]["score"] == pytest.approx(float(q @ embedder.encode_documents([STATEMENTS[1]])[0]), abs=1e-3)


def test_thoughts_are_labelled_with_the_score_that_recalled_them(tmp_path: Path, embedder: Embedder) -> None:
    for association in (True, False):
        copilot = copilot_for(tmp_path / str(association), embedder, association=association)
        vector = embedder.encode_documents(["SPECTER learns paper embeddings from citations."])
        copilot.store.insert_with_vectors("thoughts", [{"user_id": "ada", "text": "SPECTER learns paper embeddings "
                                                        "from citations.", "confidence": 0.9, "depth": 1,
                                                        "public": 0, "flagged": 0}], vector)
        items = copilot.retrieve("How is SPECTER trained?", user_id="ada")
        assert [i.recalled_by for i in items] == ["association" if association else "embedding"]
        assert np.isfinite(items[0].score)


CHATTY = ("The football final was a mess, we lost on penalties and everyone went to the pub afterwards to sulk. "
          "Anyway, I've been coughing every night this week.")
MORE = ["We adopted a rescue dog called Biscuit last spring.", "Our team won the office football tournament in June.",
        "I used to play the trumpet in a jazz band at school."]


@pytest.mark.parametrize("association", [True, False])
def test_a_memory_one_sentence_calls_for_is_not_drowned_by_the_rest_of_the_message(
        tmp_path: Path, embedder: Embedder, association: bool) -> None:
    found = {}
    for by_sentence in (True, False):
        store = Store(tmp_path / f"{by_sentence}.db", tmp_path / f"i{by_sentence}")
        copilot = Copilot(Settings(association=association, recall_by_sentence=by_sentence), store, embedder,
                          ScriptedLLM())
        ids = [copilot.remember(s, user_id="ada") for s in STATEMENTS + MORE]
        found[by_sentence] = hits = copilot.recall(CHATTY, user_id="ada", k=3)
        assert len(hits) == 3 and all(h["id"] in ids for h in hits)
        assert hits[0]["recalled_by"] == ("association" if association else "embedding")
        asthma = ids[0]
    by_sentence, whole = found[True], found[False]
    assert by_sentence[0]["id"] == asthma
    assert by_sentence[0]["cue"] == "Anyway, I've been coughing every night this week.", "the sentence that called"
    assert by_sentence[0]["score"] >= MEMORY_MIN_SCORE, "strong enough to personalise the answer"
    assert whole[0]["id"] != asthma, "read whole, the football small talk wins"
    assert all(h["cue"] is None for h in whole)
    football = next(h for h in by_sentence if h["id"] != asthma)
    assert football["cue"].startswith("The football final"), "each memory names the sentence that recalled it"
    assert recalled_by(by_sentence[0]) == f"{by_sentence[0]['recalled_by']}, by “{by_sentence[0]['cue']}”"
    assert recalled_by(whole[0]) == whole[0]["recalled_by"]


def test_a_filler_sentence_neither_names_nor_weakens_what_the_whole_message_recalls(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    assert message_parts("Reading on paper helps me focus. Hmm. Hmm.") == ["Reading on paper helps me focus. Hmm. Hmm.",
                                                                          "Reading on paper helps me focus."]
    monkeypatch.setattr(scoring, "MIN_WORDS", 1)  # read even "Hmm." apart: a short sentence may rank a memory first
    copilot = copilot_for(tmp_path, embedder, association=True)
    ids = [copilot.remember(s, user_id="ada") for s in (STATEMENTS[3], STATEMENTS[0], MORE[0])]
    message = "Reading on paper helps me focus. Hmm. Hmm."
    assert len(message_parts(message)) == 4 and FUSED_FROM <= 3
    hits = copilot.recall(message, user_id="ada", k=3)
    pencil = next(h for h in hits if h["id"] == ids[0])
    whole = copilot.associative_vector(embedder.encode_query(message), message)
    cosine = dict(copilot.store.search("memories", whole, 3, VectorFilter(owner="ada")))[ids[0]]
    assert pencil["score"] >= round(cosine, 4) >= MEMORY_MIN_SCORE and pencil["cue"] != "Hmm."
    _, used = copilot.memories.about("ada", message, embedder.encode_query(message))
    assert ids[0] in [m["id"] for m in used], "the memory the message is about personalises the answer"


def test_a_long_message_is_refused_before_anything_reads_it(tmp_path: Path, embedder: Embedder,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    copilot = Copilot(Settings(max_question_chars=100), Store(tmp_path / "c.db", tmp_path / "i"), embedder,
                      ScriptedLLM())
    copilot.remember(STATEMENTS[0], user_id="ada")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the message was read before its length was checked")

    monkeypatch.setattr(copilot.memories, "about", never)
    monkeypatch.setattr(copilot, "follow_up", never)
    with pytest.raises(LimitExceeded, match="limited to 100 characters"):
        next(copilot.chat_stream("ada", "Sorry for the silence. " * 5 + "I've been coughing every night."))


def test_a_message_of_one_sentence_or_a_user_of_few_memories_is_recalled_by_the_whole_message(
        tmp_path: Path, embedder: Embedder) -> None:
    one = "I keep coughing at night, e.g. around 3 a.m."
    assert len(message_parts(one)) == 1
    copilot = copilot_for(tmp_path, embedder, association=True)
    for s in STATEMENTS + MORE:
        copilot.remember(s, user_id="ada")
    whole = copilot.associative_vector(embedder.encode_query(one), one)
    expected = copilot.store.search("memories", whole, 5, VectorFilter(owner="ada"))
    hits = copilot.recall(one, user_id="ada")
    assert [(h["id"], h["score"]) for h in hits] == [(i, round(s, 4)) for i, s in expected]
    assert all(h["cue"] is None for h in hits)
    few = copilot_for(tmp_path / "few", embedder, association=True)
    ids = [few.remember(s, user_id="bob") for s in STATEMENTS[:FUSED_FROM - 1]]
    hits = few.recall(CHATTY, user_id="bob")
    assert {h["id"] for h in hits} == set(ids) and all(h["cue"] is None for h in hits), \
        "standardised over two memories every sentence ties: the whole message ranks them"
    whole = few.associative_vector(embedder.encode_query(CHATTY), CHATTY)
    assert [h["id"] for h in hits] == [i for i, _ in few.store.search("memories", whole, 5, VectorFilter(owner="bob"))]
