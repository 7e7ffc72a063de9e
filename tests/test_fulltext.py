"""The full-text index of chunks and thoughts on both backends: scoping, writes followed, hostile queries, backfill."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from copilot.storage import Store
from copilot.storage.fulltext import fts5_query, query_terms, tsquery_text
from copilot.storage.migrations import MIGRATIONS
from copilot.storage.store import StoreError
from copilot.types import Paper, VectorFilter

DIM = 8
HOSTILE = ['"', '""', "'", "NEAR(a b)", "NEAR", "*", "xai*", "-", "-xai", "()", "(", ")", "", "   ", "AND", "OR",
           "NOT xai", 'xai" OR "dog', "text:xai", "^xai", "{text}: xai", "a & b | !c", "'; DROP TABLE chunks; --",
           "\\", "%", "?", "xai:*", "<->", "\x00", "ünïcödé"]


def vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def add_chunks(store: Store, paper: str, texts: list[str], section: str = "Intro") -> list[int]:
    records = [{"paper_id": paper, "seq": i, "section": section, "text": t, "page_start": 1, "page_end": 1,
                "n_tokens": 10} for i, t in enumerate(texts)]
    return store.insert_with_vectors("chunks", records, vectors(len(texts), len(texts)))


def add_thought(store: Store, user: str, text: str, *, confidence: float = 0.9, public: int = 0,
                flagged: int = 0) -> int:
    return store.insert_with_vectors("thoughts", [{"user_id": user, "text": text, "confidence": confidence,
                                                   "public": public, "flagged": flagged, "depth": 1}],
                                     vectors(1, len(text)))[0]


@pytest.fixture
def library(open_store):  # noqa: ANN001, ANN201 - a store of each backend with a few papers
    store = open_store()
    store.papers.add_many([Paper("p1", title="Shared"), Paper("pdf-bob", title="Bob's", user_id="bob"),
                           Paper("pdf-ada", title="Ada's", user_id="ada")])
    return store


def ids(hits: list[tuple[int, float]]) -> list[int]:
    return [i for i, _ in hits]


def test_query_terms_are_plain_words() -> None:
    assert query_terms('What does "XAI" stand for?') == ["xai", "stand"]
    assert query_terms("NEAR(x* -y) OR z") == ["x", "y", "z"]
    assert query_terms("") == [] and query_terms(None) == [] and query_terms("the of a") == []
    assert fts5_query(["xai", "stand"]) == '"xai" OR "stand"'
    assert tsquery_text(["xai", "stand"]) == "'xai' | 'stand'"
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 32


def test_best_match_first_with_or_semantics(library: Store) -> None:
    texts = ["Explainable Artificial Intelligence (XAI) makes models explain their decisions.",
             "Dense retrieval embeds questions and passages.",
             "XAI is discussed again here, with artificial agents."]
    chunk_ids = add_chunks(library, "p1", texts)
    hits = library.text_search("chunks", "What does XAI stand for in explainable artificial intelligence?", 5)
    assert ids(hits) == [chunk_ids[0], chunk_ids[2]]
    assert hits[0][1] > hits[1][1] > 0
    # Stemming: "explaining" finds "explain"/"explainable"; the section is searched too.
    assert chunk_ids[0] in ids(library.text_search("chunks", "explaining", 5))
    methods = add_chunks(library, "p1", ["Nothing about it in the body."], section="Methodology")
    assert ids(library.text_search("chunks", "methodology", 5)) == methods
    assert len(library.text_search("chunks", "xai", 1)) == 1


def test_chunks_of_another_users_upload_are_never_found(library: Store) -> None:
    shared, = add_chunks(library, "p1", ["transformers shared"])
    bobs, = add_chunks(library, "pdf-bob", ["transformers bob"])
    adas, = add_chunks(library, "pdf-ada", ["transformers ada"])
    scope = VectorFilter(owner="ada", shared=True)
    assert sorted(ids(library.text_search("chunks", "transformers", 10, scope))) == sorted([shared, adas])
    bob_scope = VectorFilter(owner="bob", shared=True)
    assert sorted(ids(library.text_search("chunks", "transformers", 10, bob_scope))) == sorted([shared, bobs])
    papers = VectorFilter(owner="ada", shared=True, papers=frozenset({"pdf-bob", "p1"}))
    assert ids(library.text_search("chunks", "transformers", 10, papers)) == [shared]
    assert library.text_search("chunks", "transformers", 10, VectorFilter(papers=frozenset())) == []


def test_thoughts_are_scoped_like_the_vectors(library: Store) -> None:
    mine = add_thought(library, "ada", "attention heads")
    private = add_thought(library, "bob", "attention bob private")
    public = add_thought(library, "bob", "attention bob public", public=1)
    add_thought(library, "ada", "attention weak", confidence=0.2)
    add_thought(library, "ada", "attention flagged", flagged=1)
    scope = VectorFilter(owner="ada", public=False, min_confidence=0.5, unflagged=True)
    assert ids(library.text_search("thoughts", "attention", 10, scope)) == [mine]
    with_public = VectorFilter(owner="ada", public=True, min_confidence=0.5, unflagged=True)
    found = ids(library.text_search("thoughts", "attention", 10, with_public))
    assert sorted(found) == sorted([mine, public]) and private not in found


def test_updates_and_deletes_are_followed(library: Store) -> None:
    thought = add_thought(library, "ada", "gradient descent converges")
    chunk, other = add_chunks(library, "p1", ["convolution kernels", "pooling layers"])
    library.update_vector("thoughts", thought, {"text": "momentum helps"}, vectors(1, 9)[0])
    assert library.text_search("thoughts", "gradient", 5) == []
    assert ids(library.text_search("thoughts", "momentum", 5)) == [thought]
    library.delete_with_vectors("chunks", [chunk])
    assert library.text_search("chunks", "convolution", 5) == []
    assert ids(library.text_search("chunks", "pooling", 5)) == [other]
    # A change of the filterable metadata (here: the confidence) is seen by the next search.
    assert library.thoughts.set_confidence(thought, 0.1)
    assert library.text_search("thoughts", "momentum", 5, VectorFilter(min_confidence=0.5)) == []
    assert library.thoughts.delete(thought)
    assert library.text_search("thoughts", "momentum", 5) == []


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(library: Store, query: str) -> None:
    chunk, = add_chunks(library, "p1", ["XAI means explainable AI; a dog, b and c."])
    add_thought(library, "ada", "xai dog thought")
    for kind in ("chunks", "thoughts"):
        hits = library.text_search(kind, query, 5, VectorFilter(owner="ada", shared=True))
        assert all(isinstance(i, int) and np.isfinite(score) for i, score in hits)
    if "xai" in query.lower():
        assert chunk in ids(library.text_search("chunks", query, 5))


def test_only_chunks_and_thoughts_are_searchable(library: Store) -> None:
    with pytest.raises(StoreError, match="no full-text index"):
        library.text_search("memories", "anything", 5)
    assert library.text_search("chunks", "anything", 0) == []


def test_migration_indexes_rows_already_there(tmp_path: Path) -> None:
    db_path = tmp_path / "c.db"
    with Store(db_path, tmp_path / "i") as store:
        store.papers.add_many([Paper("p1", title="Shared")])
        chunk, = add_chunks(store, "p1", ["backfilled sentence about lattices"])
        thought = add_thought(store, "ada", "backfilled thought about lattices")
    # The database as it was before the full-text step: its tables, triggers and record dropped.
    conn = sqlite3.connect(db_path)
    for table in ("chunks", "thoughts"):
        conn.execute(f"DROP TABLE {table}_fts")
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_fts_{trigger}")
    conn.execute("DELETE FROM _migrations WHERE name = 'm007_full_text'")
    conn.commit()
    conn.close()
    with Store(db_path, tmp_path / "i") as store:
        assert store.schema_version == len(MIGRATIONS)
        assert ids(store.text_search("chunks", "lattices", 5)) == [chunk]
        assert ids(store.text_search("thoughts", "lattices", 5)) == [thought]


def test_postgres_migration_indexes_rows_already_there(pg_url: str) -> None:
    import psycopg

    from copilot.storage.pg_migrations import PG_MIGRATIONS, m007_full_text
    from copilot.storage.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        store.papers.add_many([Paper("p1", title="Shared")])
        chunk, = add_chunks(store, "p1", ["backfilled sentence about lattices"])
        thought = add_thought(store, "ada", "backfilled thought about lattices")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE chunks DROP COLUMN text_search")
        conn.execute("ALTER TABLE thoughts DROP COLUMN text_search")
        conn.execute("DELETE FROM _migrations WHERE name = %s", [m007_full_text.__name__])
    with PostgresStore(pg_url) as store:
        assert store.schema_version == len(PG_MIGRATIONS)
        assert ids(store.text_search("chunks", "lattices", 5)) == [chunk]
        assert ids(store.text_search("thoughts", "lattice", 5)) == [thought]


def test_reindex_rebuilds_a_lost_full_text_index(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db", tmp_path / "i") as store:
        store.papers.add_many([Paper("p1", title="Shared")])
        chunk, = add_chunks(store, "p1", ["phonons in crystals"])
        store.conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")  # the index emptied
        assert store.text_search("chunks", "phonons", 5) == []
        store.reindex()
        assert ids(store.text_search("chunks", "phonons", 5)) == [chunk]
        store.conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
