"""Personal memories and thoughts recalled with the association score (switchable), never another user's."""

from pathlib import Path

import numpy as np
import pytest

from copilot.config import Settings
from copilot.embeddings import Embedder, get_embedder
from copilot.engine import Copilot
from copilot.storage import Store
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
