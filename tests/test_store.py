"""The store on both backends (SQLite + FAISS, PostgreSQL + pgvector): vectors written, searched, updated and
deleted with their rows, all or nothing, and filters meaning their SQL; then what only the embedded index has
(snapshots, deltas, generations)."""

from pathlib import Path

import numpy as np
import pytest

from copilot.storage.migrations import MIGRATIONS
from copilot.storage import Store, StoreError, from_blob
from copilot.storage.vectors import index_files
from tests.conftest import count_rows, get_row


def unit(seed: int, n: int = 1, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    """The embedded store alone, for what only it has (index files, generations)."""
    s = Store(tmp_path / "copilot.db", tmp_path / "index")
    yield s
    s.close()


def memories(n: int, user: str = "u1") -> list[dict]:
    return [{"user_id": user, "text": f"memory {i}", "created_at": "2026-01-01"} for i in range(n)]


def test_schema_wal_and_migrations_applied_once(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db", tmp_path / "i") as store:
        assert store.journal_mode == "wal"
        assert store.schema_version == len(MIGRATIONS)
        tables = set(store.db.table_names())
        assert {"papers", "chunks", "thoughts", "thought_sources", "users", "queries", "feedback", "profiles",
                "memories", "eval_runs", "_migrations"} <= tables
    with Store(tmp_path / "c.db", tmp_path / "i") as again:
        assert again.db["_migrations"].count == len(MIGRATIONS)


def test_insert_search_and_reopen(store: Store, open_store) -> None:  # noqa: ANN001
    vectors = unit(0, 6)
    ids = store.insert_with_vectors("memories", memories(6), vectors)
    assert len(ids) == 6
    assert store.search("memories", vectors[2], 1)[0][0] == ids[2]
    stored = get_row(store, "memories", ids[4])
    assert np.allclose(from_blob(stored["embedding"]), vectors[4])
    store.close()
    with open_store() as reopened:
        assert reopened.search("memories", vectors[5], 1)[0][0] == ids[5]
        assert reopened.check_consistency() == {"chunks": True, "thoughts": True, "memories": True}


def test_update_and_delete_keep_index_in_step(store: Store) -> None:
    vectors = unit(1, 4)
    ids = store.insert_with_vectors("memories", memories(4), vectors)
    store.update_vector("memories", ids[0], {"text": "changed"}, vectors[3])
    top = store.search("memories", vectors[3], 2)
    assert {i for i, _ in top} == {ids[0], ids[3]}
    assert get_row(store, "memories", ids[0])["text"] == "changed"
    assert store.delete_with_vectors("memories", [ids[3]]) == 1
    assert ids[3] not in [i for i, _ in store.search("memories", vectors[3], 4)]
    assert store.check_consistency()["memories"]
    with pytest.raises(StoreError):
        store.update_vector("memories", 999, {"text": "x"}, vectors[0])


def test_failed_batch_stores_nothing(store: Store) -> None:
    store.insert_with_vectors("memories", memories(2), unit(2, 2))
    before = store.generation("memories") if store.backend == "sqlite" else None
    bad = [{"user_id": "u", "text": "ok", "created_at": "x"}, {"user_id": "u", "text": "x", "no_such_column": 1}]
    with pytest.raises(StoreError):
        store.insert_with_vectors("memories", bad, unit(3, 2))
    with pytest.raises(StoreError, match="nothing was written"):
        store.insert_with_vectors("memories", [{"user_id": "u", "nope": 1}], unit(3, 1))
    assert count_rows(store, "memories") == 2
    if store.backend == "sqlite":
        assert store.generation("memories") == before
    assert store.check_consistency()["memories"]


def test_stale_or_corrupt_index_is_rebuilt(sqlite_store: Store, tmp_path: Path) -> None:
    store = sqlite_store
    vectors = unit(4, 5)
    ids = store.insert_with_vectors("memories", memories(5), vectors)
    (path, gen), = index_files(tmp_path / "index", "memories")
    for part in path.iterdir():
        part.write_bytes(b"garbage")
    fresh = Store(tmp_path / "copilot.db", tmp_path / "index")
    try:
        assert fresh.search("memories", vectors[1], 1)[0][0] == ids[1]
        # another process bumps the generation: this one notices and reloads
        store.insert_with_vectors("memories", memories(1), unit(5, 1))
        assert len(fresh.index("memories")) == 6
    finally:
        fresh.close()


def test_unknown_vector_table(store: Store) -> None:
    with pytest.raises(StoreError, match="not a vector table"):
        store.insert_with_vectors("papers", [{"id": "x"}], unit(0, 1))


def test_reindex_gives_identical_results(store: Store) -> None:
    vectors = unit(6, 30)
    store.insert_with_vectors("memories", memories(30), vectors)
    before = [store.search("memories", v, 5) for v in vectors[:5]]
    assert store.reindex() == {"chunks": 0, "thoughts": 0, "memories": 30}
    after = [store.search("memories", v, 5) for v in vectors[:5]]
    assert before == after


def test_joined_transaction_is_all_or_nothing(store: Store) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction() as conn:
            store.insert_with_vectors("memories", memories(3), unit(7, 3))
            conn.execute("INSERT INTO users (id, name) VALUES ('u9', 'x')")
            raise RuntimeError("boom")
    assert count_rows(store, "memories") == 0
    assert count_rows(store, "users") == 0
    assert store.search("memories", unit(7, 1)[0], 3) == []
    with store.transaction() as conn:
        ids = store.insert_with_vectors("memories", memories(2), unit(8, 2))
        conn.execute("INSERT INTO users (id, name) VALUES ('u9', 'x')")
        inside = store.search("memories", unit(8, 2)[0], 1)
        if store.backend == "sqlite":
            assert inside == [], "the embedded index changes only after the commit"
        else:
            assert inside[0][0] == ids[0], "vectors are rows: the transaction reads its own writes"
    assert store.search("memories", unit(8, 2)[0], 1)[0][0] == ids[0]
    assert store.check_consistency()["memories"]


def test_searches_apply_the_same_filter_as_sql(store: Store, open_store) -> None:  # noqa: ANN001
    """The index's filters (partitions and metadata columns) select exactly the rows the SQL condition does."""
    from copilot.retrieval import chunk_scope, thought_scope
    from copilot.storage.store import VECTOR_META, filter_sql
    from copilot.types import Paper, VectorFilter

    rng = np.random.default_rng(11)
    for paper, owner in (("shared1", None), ("shared2", None), ("mine", "u1"), ("theirs", "u2")):
        store.papers.add(Paper(paper, user_id=owner, title=paper))
        store.insert_with_vectors("chunks", [{"paper_id": paper, "seq": i, "text": f"{paper} {i}"} for i in range(6)],
                                  unit(int(rng.integers(1000)), 6))
    thoughts = [{"user_id": f"u{i % 3}", "text": f"t{i}", "confidence": i / 12, "public": int(i % 4 == 0),
                 "flagged": int(i % 5 == 0)} for i in range(12)]
    thought_ids = store.insert_with_vectors("thoughts", thoughts, unit(21, 12))
    with store.transaction() as conn:  # a change the index learns of only through meta_changed
        conn.execute("UPDATE thoughts SET confidence = 0.99, public = 1 WHERE id = ?", [thought_ids[1]])
        store.meta_changed("thoughts", [thought_ids[1]])
    filters = [("chunks", chunk_scope("u1")), ("chunks", chunk_scope("u2", ["mine", "theirs", "shared1"])),
               ("chunks", VectorFilter(papers=frozenset({"theirs"}))), ("chunks", chunk_scope("nobody")),
               ("thoughts", thought_scope("u1", include_public=True, min_confidence=0.3)),
               ("thoughts", thought_scope("u2", include_public=False, min_confidence=0.0)),
               ("thoughts", VectorFilter(owner="u0"))]
    for kind, where in filters:
        sql, params = filter_sql(where)  # the filter evaluated by SQL
        expected = {r[0] for r in store.conn.execute(f"SELECT id FROM ({VECTOR_META[kind]}) AS m WHERE {sql}",
                                                     params)}
        found = store.search(kind, unit(5, 1)[0], 100, where)
        assert {i for i, _ in found} == expected and len(expected) == store.count(kind, where), (kind, where)
        with open_store() as reopened:
            assert reopened.search(kind, unit(5, 1)[0], 100, where) == found, "the snapshot and delta agree"
    assert store.check_consistency() == {"chunks": True, "thoughts": True, "memories": True}


def test_a_committed_write_never_fails_because_of_its_index(sqlite_store: Store,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from copilot.storage.vectors import IndexLog

    store = sqlite_store
    ids = store.insert_with_vectors("memories", memories(2), unit(30, 2))

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(IndexLog, "append", disk_full)
    more = store.insert_with_vectors("memories", memories(1), unit(31, 1))  # committed: no error reaches us
    monkeypatch.undo()
    assert count_rows(store, "memories") == 3
    assert store.search("memories", unit(31, 1)[0], 1)[0][0] == more[0], "the index is rebuilt from the records"
    assert store.check_consistency()["memories"] and ids


def test_vectors_of_another_size_are_refused_before_writing(store: Store) -> None:
    store.insert_with_vectors("memories", memories(2), unit(32, 2))
    with pytest.raises(StoreError, match="8 dimensions, these have 12"):
        store.insert_with_vectors("memories", memories(1), unit(33, 1, dim=12))
    assert count_rows(store, "memories") == 2


def test_index_files_of_a_lost_history_are_not_trusted(tmp_path: Path) -> None:
    """A database restored from a backup reaches the same generation numbers with other rows: the index files
    made for the lost rows carry another token, so they are rebuilt instead of loaded."""
    import sqlite3

    db, index_dir = tmp_path / "copilot.db", tmp_path / "index"
    with Store(db, index_dir) as store:
        store.insert_with_vectors("memories", memories(3), unit(40, 3))
        with sqlite3.connect(db) as live, sqlite3.connect(tmp_path / "backup.db") as backup:
            live.backup(backup)
        lost = store.insert_with_vectors("memories", memories(2), unit(41, 2))  # generation 2: then lost
    (tmp_path / "backup.db").replace(db)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with Store(db, index_dir) as store:
        kept = store.insert_with_vectors("memories", memories(2), unit(42, 2))  # generation 2 again, other rows
        assert store.generation("memories") == 2
    with Store(db, index_dir) as fresh:
        for vector, item_id in zip(unit(42, 2), kept, strict=True):  # the same row ids as the lost rows had
            (hit_id, score), = fresh.search("memories", vector, 1)
            assert hit_id == item_id and score > 0.999, "the index holds the rows the database holds"
        assert max(score for _, score in fresh.search("memories", unit(41, 2)[0], 5)) < 0.999, lost
        assert fresh.check_consistency()["memories"]
