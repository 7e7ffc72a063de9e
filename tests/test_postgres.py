"""What only the PostgreSQL backend has: the same migrations as SQLite, chosen by ``COPILOT_DATABASE_URL``,
``vector(n)`` columns with an HNSW index, a clear error for a server that is not there, several stores on one
database, and filtered searches that still return ``k`` rows when the graph alone would come back short."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.config import Settings
from copilot.storage import Store, StoreError
from copilot.storage.migrations import MIGRATIONS
from copilot.storage.pg_migrations import PG_MIGRATIONS
from copilot.storage.postgres import PostgresStore
from copilot.storage.vectors import IndexOptions
from copilot.types import VectorFilter


def unit(seed: int, n: int = 1, dim: int = 16) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_both_backends_have_the_same_migrations() -> None:
    assert [m.__name__ for m in PG_MIGRATIONS] == [m.__name__ for m in MIGRATIONS]


def test_the_url_chooses_postgresql_and_migrations_run_once(pg_url: str, tmp_path) -> None:  # noqa: ANN001
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url)
    assert settings.storage_backend == "postgresql"
    with Store.open(settings) as store:
        assert isinstance(store, PostgresStore) and store.backend == "postgresql"
        assert store.schema_version == len(MIGRATIONS)
        assert store.server_version.split(".")[0].isdigit() and store.pgvector_version
        store.memories.add("ada", "I review for ACL.", unit(1, dim=384))
        column, index = store.conn.execute(
            "SELECT format_type(atttypid, atttypmod), (SELECT indexdef FROM pg_indexes WHERE indexname = "
            "'memories_embedding_hnsw') FROM pg_attribute WHERE attrelid = to_regclass('memories') "
            "AND attname = 'embedding'").fetchone()
        assert column == "vector(384)" and "USING hnsw (embedding vector_ip_ops)" in index
    with Store.open(settings) as again:
        assert again.schema_version == len(MIGRATIONS) and again.memories.count("ada") == 1
    assert not (tmp_path / "data" / "copilot.db").exists(), "nothing is written to an embedded database"


@pytest.mark.parametrize("url", ["postgresql://copilot:s3cret-pw@127.0.0.1:1/copilot",
                                 "postgresql://copilot:s3cret-pw@no-such-host.invalid:5432/copilot"])
def test_an_unreachable_database_is_one_clear_line_without_the_password(url: str, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(StoreError) as caught:
        Store.open(Settings(data_dir=tmp_path, database_url=url))
    message = str(caught.value)
    host = url.split("@")[1].split(":")[0]
    assert message.startswith(f"cannot connect to the PostgreSQL database at {host}:"), message
    assert "s3cret-pw" not in message and "\n" not in message


def test_an_unknown_database_scheme_is_refused(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(StoreError, match="'mysql' database; supported: postgres, postgresql"):
        Store.open(Settings(data_dir=tmp_path, database_url="mysql://u:p@h/db"))


def test_two_stores_on_one_database_see_each_others_writes(pg_url: str) -> None:
    with PostgresStore(pg_url) as first, PostgresStore(pg_url) as second:
        (mine,) = first.insert_with_vectors("memories", [{"user_id": "ada", "text": "a", "created_at": "t"}],
                                            unit(2))
        assert second.search("memories", unit(2)[0], 1, VectorFilter(owner="ada"))[0][0] == mine
        assert second.memories.delete(mine, "ada") and first.search("memories", unit(2)[0], 1) == []


def test_a_narrow_filter_still_returns_k_nearest(pg_url: str) -> None:
    """A filter that keeps 2% of the rows: the search returns the k nearest of those rows exactly, whatever the
    graph's candidate list (10 here) would have found by itself."""
    vectors = unit(3, 3000)
    owners = ["rare" if i % 50 == 0 else f"u{i % 7}" for i in range(3000)]
    with PostgresStore(pg_url, IndexOptions(ef_search=10)) as store:
        ids = store.insert_with_vectors(
            "thoughts", [{"user_id": o, "text": "t", "confidence": 0.9, "public": 0, "flagged": 0} for o in owners],
            vectors)
        query = unit(4)[0]
        for where, k in ((VectorFilter(owner="rare"), 20), (VectorFilter(owner="rare", min_confidence=0.5), 60),
                         (VectorFilter(owner="u1"), 30)):
            expected = sorted(((float(vectors[i] @ query), ids[i]) for i, o in enumerate(owners)
                               if o == where.owner), reverse=True)[:k]
            found = store.search("thoughts", query, k, where)
            assert [i for i, _ in found] == [i for _, i in expected], where
            assert np.allclose([s for _, s in found], [s for s, _ in expected], atol=1e-5)


def test_doctor_reports_the_backend_the_server_and_pgvector(pg_url: str, tmp_path) -> None:  # noqa: ANN001
    from copilot.tools.doctor import check_postgresql, check_sqlite, checks_for, format_lines, run_checks

    settings = Settings(data_dir=tmp_path, database_url=pg_url)
    assert check_postgresql in checks_for(settings) and check_sqlite not in checks_for(settings)
    assert check_sqlite in checks_for(Settings(data_dir=tmp_path))
    (result,) = run_checks(settings, [check_postgresql])
    assert result.ok, result.detail
    assert result.data["backend"] == "postgresql" and result.data["server_version"].startswith("16")
    assert f"PostgreSQL {result.data['server_version']}, pgvector {result.data['pgvector_version']}" in result.detail
    down = Settings(data_dir=tmp_path, database_url="postgresql://copilot:s3cret-pw@127.0.0.1:1/copilot")
    (line,) = format_lines(run_checks(down, [check_postgresql]))
    assert line.startswith("FAIL postgresql StorageError: cannot connect to the PostgreSQL database at 127.0.0.1:1")
    assert "s3cret-pw" not in line


def test_connections_the_server_dropped_are_replaced(pg_url: str) -> None:
    """A server restart drops every pooled connection: a read is run again on a fresh one; a transaction that was
    under way is a StoreError naming the host, keeps nothing, and the next one works."""
    import psycopg

    def drop_connections() -> None:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                          "AND datname = current_database() AND backend_type = 'client backend'")

    with PostgresStore(pg_url, pool_size=3) as store:
        store.memories.add("ada", "I review for ACL.", unit(5))
        drop_connections()
        assert store.memories.count("ada") == 1 and store.search("memories", unit(5)[0], 1)
        drop_connections()
        with pytest.raises(StoreError, match="^lost the PostgreSQL database at "):
            with store.transaction():
                store.memories.add("ada", "I chair a workshop.", unit(6))
        assert store.memories.count("ada") == 1
        store.memories.add("ada", "I chair a workshop.", unit(6))
        assert store.memories.count("ada") == 2
