"""The second storage backend: records and vectors in one PostgreSQL database with pgvector
(``COPILOT_DATABASE_URL=postgresql://…``), so several app processes, on several machines, share one library.

The repositories are the same as on SQLite. They write their SQL in the subset both backends speak (``?``
placeholders, ``RETURNING id``, ``ON CONFLICT``, ``TRUE``/``FALSE``), and :class:`PgConnection` hands it to
psycopg with psycopg's placeholders; the one fragment that differs is in :data:`~copilot.storage.rows.POSTGRESQL`.
Connections come from a pool (``COPILOT_DATABASE_POOL_SIZE``). A transaction belongs to its thread: every
statement a repository runs inside ``transaction()``, on whatever handle, goes to that transaction's
connection, and a statement outside one runs on a pooled connection in autocommit mode.

Vectors are a ``vector(n)`` column of their rows with an HNSW index (inner product, the cosine of unit vectors),
so a vector is written, updated and rolled back with its row, and there is no index file to keep in step. A
search is one statement: the filter's terms (``filter_sql``, the same SQL the embedded index is tested against)
as its ``WHERE``, the distance as its ``ORDER BY``. With pgvector 0.8 or later an iterative index scan keeps
walking the graph until ``k`` rows pass the filter; with an older pgvector a filtered search that comes back
short is answered exactly (the same statement without the index), so it still returns ``k`` rows when ``k`` exist.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import quote

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from pgvector.psycopg.vector import VectorBinaryLoader, VectorLoader
from psycopg.abc import Buffer
from psycopg.conninfo import conninfo_to_dict
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout

from copilot.config import Settings
from copilot.storage.fulltext import query_terms, tsquery_text
from copilot.storage.migrations import VECTOR_TABLES
from copilot.storage.pg_migrations import migrate, schema_version
from copilot.storage.rows import POSTGRESQL
from copilot.storage.store import (
    VECTOR_META,
    StorageError,
    Store,
    StoreError,
    _check_kind,
    _check_text_kind,
    attach_repositories,
    checked_batch,
    filter_sql,
)
from copilot.storage.vectors import IndexOptions
from copilot.types import VectorFilter

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10
_EF_SEARCH_MAX = 1000  # pgvector's largest hnsw.ef_search

# Each vector table's rows as a search reads them: the filterable metadata of VECTOR_META plus the embedding.
_SEARCHED = {
    "chunks": "SELECT c.id, c.embedding, p.user_id AS owner, c.paper_id AS paper, 0 AS public, "
              "CAST(NULL AS REAL) AS confidence, 0 AS flagged FROM chunks c LEFT JOIN papers p ON p.id = c.paper_id "
              "WHERE c.embedding IS NOT NULL",
    "thoughts": "SELECT id, embedding, user_id AS owner, NULL AS paper, COALESCE(public, 0) AS public, confidence, "
                "COALESCE(flagged, 0) AS flagged FROM thoughts WHERE embedding IS NOT NULL",
    "memories": "SELECT id, embedding, user_id AS owner, NULL AS paper, 0 AS public, CAST(NULL AS REAL) AS confidence, "
                "0 AS flagged FROM memories WHERE embedding IS NOT NULL",
}

# The rows of each full-text table as a text search reads them: the filterable metadata plus the ``tsvector``.
_TEXT_SEARCHED = {
    "chunks": "SELECT c.id, c.text_search, p.user_id AS owner, c.paper_id AS paper, 0 AS public, "
              "CAST(NULL AS REAL) AS confidence, 0 AS flagged FROM chunks c LEFT JOIN papers p ON p.id = c.paper_id "
              "WHERE c.embedding IS NOT NULL",
    "thoughts": "SELECT id, text_search, user_id AS owner, NULL AS paper, COALESCE(public, 0) AS public, confidence, "
                "COALESCE(flagged, 0) AS flagged FROM thoughts WHERE embedding IS NOT NULL",
}


@lru_cache(maxsize=2048)
def to_psycopg(sql: str) -> str:
    """A repository's statement with psycopg's placeholders: ``?`` becomes ``%s``, a literal ``%`` is doubled."""
    return sql.replace("%", "%%").replace("?", "%s")


def where_of(url: str) -> str:
    """The host (and port) of a database URL, for messages: never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "an unreadable COPILOT_DATABASE_URL"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    port = parts.get("port")
    database = parts.get("dbname")
    return f"{host}{':' + port if port else ''}{'/' + database if database else ''}"


def _reason(exc: BaseException, url: str) -> str:
    """The first line of a driver error, without the password should the driver have repeated it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = (lines[0] if lines else type(exc).__name__).removeprefix("connection failed: ")
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        password = None
    return text.replace(password, "***") if password else text


class _ArrayLoader(VectorBinaryLoader):
    """Reads a ``vector`` as the float32 array the repositories expect (as ``from_blob`` gives on SQLite)."""

    def load(self, data: Buffer) -> np.ndarray:
        return np.asarray(super().load(data).to_numpy(), dtype=np.float32)


class _ArrayTextLoader(VectorLoader):
    def load(self, data: Buffer) -> np.ndarray:
        return np.asarray(super().load(data).to_numpy(), dtype=np.float32)


class PgResult:
    """What one statement gave, read to the end: the rows, how many rows it changed, its column names."""

    def __init__(self, cursor: psycopg.Cursor) -> None:
        self.description = cursor.description
        self.rowcount = cursor.rowcount
        self._rows = cursor.fetchall() if cursor.description else []
        self._next = 0

    def fetchone(self) -> tuple | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple]:
        rows, self._next = self._rows[self._next:], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.fetchall())


class PgConnection:
    """The store's ``conn`` as the repositories use it (``execute``, ``executemany``, ``in_transaction``), on
    PostgreSQL: inside the thread's transaction when there is one, else on a pooled connection."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @property
    def in_transaction(self) -> bool:
        return self._store._current() is not None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgResult:
        statement, values = to_psycopg(sql), list(params)
        return self._store.run(lambda conn: PgResult(conn.execute(statement, values, binary=True)))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        statement, values = to_psycopg(sql), [list(r) for r in rows]

        def many(conn: psycopg.Connection) -> None:
            with conn.cursor() as cursor:
                cursor.executemany(statement, values)

        if values:
            self._store.run(many)


class PostgresStore:
    """Records and vectors in one PostgreSQL database with pgvector: the interface of :class:`Store`."""

    backend = "postgresql"
    dialect = POSTGRESQL

    def __init__(self, url: str, index_options: IndexOptions | None = None, pool_size: int = 10) -> None:
        self.where = where_of(url)
        self.index_options = index_options or IndexOptions()
        self._local = threading.local()
        self._dims: dict[str, int] = {}
        self._bulk = False
        first = self._connect(url)
        try:
            migrate(first)
            self.server_version = str(first.execute("SHOW server_version").fetchone()[0]).split()[0]
            self.pgvector_version = str(first.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0])
        except psycopg.Error as exc:
            raise StorageError(f"the PostgreSQL database at {self.where} could not be prepared: "
                             f"{_reason(exc, url)}") from exc
        finally:
            first.close()
        self.iterative_scan = _version(self.pgvector_version) >= (0, 8)
        self.pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False, configure=self._configure,
                                   kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S})
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
        except PoolTimeout as exc:
            self.pool.close()
            raise StorageError(f"cannot connect to the PostgreSQL database at {self.where}: no connection within "
                             f"{CONNECT_TIMEOUT_S * 2} s") from exc
        self.conn = PgConnection(self)
        attach_repositories(self)

    @classmethod
    def open(cls, settings: Settings) -> PostgresStore:
        return cls(settings.database_url.get_secret_value(), Store.index_options_from(settings),
                   settings.database_pool_size)

    def _connect(self, url: str) -> psycopg.Connection:
        try:
            return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise StorageError(f"cannot connect to the PostgreSQL database at {self.where}: "
                             f"{_reason(exc, url)}") from None

    def _configure(self, conn: psycopg.Connection) -> None:
        """Set up each pooled connection: vectors read as arrays, the search breadth, iterative scans, plans."""
        register_vector(conn)
        info = TypeInfo.fetch(conn, "vector")
        conn.adapters.register_loader(info.oid, _ArrayTextLoader)
        conn.adapters.register_loader(info.oid, _ArrayLoader)
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)",
                     [str(min(self.index_options.ef_search, _EF_SEARCH_MAX))])
        if self.iterative_scan:
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
        # Statements are prepared after a few runs; a generic plan would choose between the HNSW index and an
        # exact scan without seeing the filter's values or k: plan each search for its own.
        conn.execute("SET plan_cache_mode = force_custom_plan")

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- connections and transactions --------------------------------------------------------------

    def _current(self) -> psycopg.Connection | None:
        return getattr(self._local, "conn", None)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """The thread's transaction connection when it has one, else a pooled one for as long as the block."""
        current = self._current()
        if current is not None:
            yield current
            return
        with self._pooled() as conn:
            yield conn

    def run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """``work`` on the thread's transaction connection, else on a pooled one. A pooled connection the server
        dropped (a restart, a fail-over) is replaced and ``work`` runs once more; a server that stays away is a
        :class:`StoreError` naming its host."""
        current = self._current()
        if current is not None:
            return work(current)
        for attempt in (1, 2):
            conn = None
            try:
                with self._pooled() as conn:
                    return work(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or conn is None or not conn.broken:
                    raise self._lost(exc) from None
                self.pool.check()  # every idle connection the server dropped is replaced
        raise AssertionError("unreachable")

    @contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection]:
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise StorageError(f"cannot connect to the PostgreSQL database at {self.where}: no connection within "
                             f"{self.pool.timeout:.0f} s") from None

    def _lost(self, exc: psycopg.OperationalError) -> Exception:
        if isinstance(exc, psycopg.errors.TransactionRollback):
            return exc  # a serialization failure or deadlock: the caller's to retry, as on any database
        return StorageError(f"lost the PostgreSQL database at {self.where}: {_reason(exc, '')}")

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """A write transaction: committed on success, rolled back on any error.

        Re-entrant: a nested call joins the outer transaction, as on SQLite. Vectors are rows, so a rolled-back
        transaction takes its vectors with it. A connection lost on the way is a :class:`StoreError` (nothing of
        the transaction is kept), and the pool replaces the dropped connections for the next one.
        """
        if self._current() is not None:
            yield self.conn
            return
        with self._pooled() as conn:
            self._local.conn = conn
            try:
                with conn.transaction():
                    yield self.conn
            except psycopg.OperationalError as exc:
                if not conn.broken:
                    raise
                self.pool.check()
                raise self._lost(exc) from None
            finally:
                self._local.conn = None
                self._local.typed = set()

    def serialize(self, key: str) -> None:
        """Inside a write transaction: wait until no other transaction (of any process) holds ``key``, and hold it
        until this one ends: a transaction-scoped advisory lock, so a check-then-write per user stays one at a
        time as on SQLite."""
        with self.connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [key])

    @property
    def schema_version(self) -> int:
        with self.connection() as conn:
            return schema_version(conn)

    def integrity_ok(self) -> bool:
        with self.connection() as conn:
            return conn.execute("SELECT 1").fetchone()[0] == 1

    # ----- vector writes -----------------------------------------------------------------------------

    def _dimension(self, conn: psycopg.Connection, kind: str) -> int:
        """The dimension ``kind``'s embedding column holds; -1 while no vector was ever written."""
        if kind in self._dims:
            return self._dims[kind]
        row = conn.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                           "AND attname = 'embedding'", [kind]).fetchone()
        dim = int(row[0]) if row else -1
        if dim > 0 and kind not in getattr(self._local, "typed", ()):
            self._dims[kind] = dim  # committed (not this transaction's own change): it never changes again
        return dim

    def _fix_dimension(self, conn: psycopg.Connection, kind: str, dim: int) -> None:
        """Refuse vectors of another size than ``kind`` holds (another embedding model), before writing; the first
        vector ever written gives the column its dimension and its HNSW index (in the writer's transaction)."""
        held = self._dimension(conn, kind)
        if held == -1:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"copilot.dimension.{kind}"])
            held = self._dimension(conn, kind)
            if held == -1:
                options = self.index_options
                self._local.typed = {*getattr(self._local, "typed", ()), kind}  # undone if this rolls back
                conn.execute(f"ALTER TABLE {kind} ALTER COLUMN embedding TYPE vector({int(dim)})")
                if not self._bulk:
                    self._create_index(conn, kind)
                held = dim
        if held != dim:
            raise StoreError(f"{kind} vectors have {held} dimensions, these have {dim}: the embedding model "
                             "changed; nothing was written")

    def _create_index(self, conn: psycopg.Connection, kind: str) -> None:
        options = self.index_options
        conn.execute(f"CREATE INDEX IF NOT EXISTS {kind}_embedding_hnsw ON {kind} USING hnsw (embedding "
                     f"vector_ip_ops) WITH (m = {int(options.hnsw_m)}, "
                     f"ef_construction = {int(options.ef_construction)})")

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Many rows at once (a copied instance, a benchmark library): the HNSW indices are dropped while they
        come in and built once at the end, far quicker than inserting each vector into the graph. Searches in the
        meantime are exact. Only for a database nobody else is writing to. Should the load fail, the indices are
        left to ``reindex``."""
        with self.connection() as conn:
            for kind in VECTOR_TABLES:
                conn.execute(f"DROP INDEX IF EXISTS {kind}_embedding_hnsw")
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
        self.reindex()

    def _build_memory_mb(self, conn: psycopg.Connection, kind: str) -> int:
        """Memory for building ``kind``'s graph: each vector with its links (2M at the base layer), plus a quarter;
        at least 64 MB, at most 8 GB. 1M vectors of 384 dimensions at M 32 get about 3 GB."""
        rows = int(conn.execute(f"SELECT COUNT(*) FROM {kind} WHERE embedding IS NOT NULL").fetchone()[0])
        dim = max(self._dimension(conn, kind), 0)
        need = rows * (dim * 4 + self.index_options.hnsw_m * 2 * 10 + 100) * 1.25 / 2**20
        return int(min(max(need, 64), 8192))

    def index_bytes(self, kind: str) -> int:
        """The size of ``kind``'s HNSW index (0 while it has none)."""
        _check_kind(kind)
        with self.connection() as conn:
            row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", [f"{kind}_embedding_hnsw"]).fetchone()
        return int(row[0] or 0)

    def insert_with_vectors(self, kind: str, records: Sequence[dict[str, Any]], vectors: np.ndarray) -> list[int]:
        """Insert ``records`` with their embeddings in one transaction."""
        _check_kind(kind)
        vectors, columns = checked_batch(records, vectors)
        if not records:
            return []
        names = ", ".join([*columns, "embedding"])
        sql = f"INSERT INTO {kind} ({names}) VALUES ({', '.join(['%s'] * (len(columns) + 1))}) RETURNING id"
        rows = [[*(record[c] for c in columns), vector] for record, vector in zip(records, vectors, strict=True)]
        ids: list[int] = []
        try:
            with self.transaction(), self.connection() as conn:
                self._fix_dimension(conn, kind, vectors.shape[1])
                with conn.cursor() as cursor:
                    cursor.executemany(sql, rows, returning=True)
                    while True:
                        ids.append(int(cursor.fetchone()[0]))
                        if not cursor.nextset():
                            break
        except psycopg.Error as exc:
            raise StoreError(f"could not store {len(records)} {kind} rows, nothing was written: "
                             f"{_reason(exc, '')}") from exc
        return ids

    def update_vector(self, kind: str, item_id: int, fields: dict[str, Any], vector: np.ndarray) -> None:
        """Replace one row's fields and embedding (e.g. a merged thought keeping the better text)."""
        _check_kind(kind)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        assignments = ", ".join(f"{c} = %s" for c in [*fields, "embedding"])
        with self.transaction(), self.connection() as conn:
            self._fix_dimension(conn, kind, len(vector))
            cursor = conn.execute(f"UPDATE {kind} SET {assignments} WHERE id = %s",
                                  [*fields.values(), vector, item_id])
            if cursor.rowcount != 1:
                raise StoreError(f"no {kind} row with id {item_id}")

    def delete_with_vectors(self, kind: str, ids: Sequence[int]) -> int:
        """Delete rows with their vectors (joins the caller's transaction when there is one)."""
        _check_kind(kind)
        ids = [int(i) for i in ids]
        if not ids:
            return 0
        with self.transaction(), self.connection() as conn:
            return conn.execute(f"DELETE FROM {kind} WHERE id = ANY(%s)", [ids]).rowcount

    def meta_changed(self, kind: str, ids: Sequence[int]) -> None:
        """Rows of ``kind`` whose filterable metadata changed: nothing to do here, a search reads the rows."""
        _check_kind(kind)

    # ----- searches ----------------------------------------------------------------------------------

    def search(self, kind: str, query: np.ndarray, k: int, where: VectorFilter | None = None
               ) -> list[tuple[int, float]]:
        """The ``k`` rows of ``kind`` nearest to ``query`` within ``where``, as (id, cosine), best first."""
        _check_kind(kind)
        if k <= 0:
            return []
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        condition, params = filter_sql(where or VectorFilter())
        condition = to_psycopg(condition)

        def nearest(conn: psycopg.Connection) -> list[tuple]:
            if self._dimension(conn, kind) == -1:
                return []
            exact = self._bulk or k > _EF_SEARCH_MAX
            rows = self._nearest(conn, kind, query, k, condition, params, exact=exact)
            if len(rows) < k and not exact:
                rows = self._nearest(conn, kind, query, k, condition, params, exact=True)
            return rows

        return [(int(i), -float(distance)) for i, distance in self.run(nearest)]

    def _nearest(self, conn: psycopg.Connection, kind: str, query: np.ndarray, k: int, condition: str,
                 params: list[Any], *, exact: bool) -> list[tuple]:
        """One search statement: through the HNSW index (its candidates re-sorted, as an iterative scan may return
        them slightly out of order), or ``exact``: every row within the filter scored (``OFFSET 0`` keeps the
        ordering away from the index)."""
        rows = f"SELECT id, embedding <#> %s AS distance FROM ({_SEARCHED[kind]}) AS m WHERE {condition}"
        if exact:
            sql = f"SELECT id, distance FROM ({rows} OFFSET 0) AS hits ORDER BY distance LIMIT %s"
        else:
            sql = (f"WITH hits AS MATERIALIZED ({rows} ORDER BY distance LIMIT %s) "
                   "SELECT id, distance FROM hits ORDER BY distance")
        ef = max(k, self.index_options.ef_search)
        if exact or ef <= min(self.index_options.ef_search, _EF_SEARCH_MAX):
            return conn.execute(sql, [query, *params, k], binary=True).fetchall()
        with conn.transaction():  # a wider candidate list for this statement only
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(min(ef, _EF_SEARCH_MAX))])
            return conn.execute(sql, [query, *params, k], binary=True).fetchall()

    def text_search(self, kind: str, query_text: str | None, k: int, where: VectorFilter | None = None
                    ) -> list[tuple[int, float]]:
        """The ``k`` rows of ``kind`` (chunks or thoughts) that best match the words of ``query_text`` within
        ``where``, as (id, ``ts_rank_cd`` score: higher is better), best first; any text is safe to pass (see
        :meth:`Store.text_search`). The match goes through the GIN index of the ``text_search`` column."""
        _check_text_kind(kind)
        terms = query_terms(query_text)
        if not terms or k <= 0:
            return []
        condition, params = filter_sql(where or VectorFilter())
        sql = (f"SELECT id, ts_rank_cd(text_search, to_tsquery('english', %s)) AS rank FROM ({_TEXT_SEARCHED[kind]}) "
               f"AS m WHERE text_search @@ to_tsquery('english', %s) AND {to_psycopg(condition)} "
               "ORDER BY rank DESC, id LIMIT %s")
        query = tsquery_text(terms)
        rows = self.run(lambda conn: conn.execute(sql, [query, query, *params, int(k)]).fetchall())
        return [(int(i), float(rank)) for i, rank in rows]

    def count(self, kind: str, where: VectorFilter | None = None) -> int:
        """How many rows of ``kind`` with a vector lie within ``where``."""
        sql, params = filter_sql(where or VectorFilter())
        return int(self.conn.execute(f"SELECT COUNT(*) FROM ({VECTOR_META[kind]}) AS m WHERE {sql}",
                                     params).fetchone()[0])

    def reindex(self, kinds: Sequence[str] = VECTOR_TABLES) -> dict[str, int]:
        """Rebuild (or build, when it is missing) the HNSW index of each of ``kinds``; returns vectors per kind.

        The build is given the memory its graph needs (``maintenance_work_mem``): a graph that outgrows it is
        finished on disk, many times slower.
        """
        counts = {}
        with self.connection() as conn:
            for kind in kinds:
                _check_kind(kind)
                conn.execute("SELECT set_config('maintenance_work_mem', %s, false)",
                             [f"{self._build_memory_mb(conn, kind)}MB"])
                if conn.execute("SELECT to_regclass(%s)", [f"{kind}_embedding_hnsw"]).fetchone()[0] is not None:
                    conn.execute(f"REINDEX INDEX {kind}_embedding_hnsw")
                elif self._dimension(conn, kind) > 0:
                    self._create_index(conn, kind)
                counts[kind] = int(conn.execute(f"SELECT COUNT(*) FROM {kind} WHERE embedding IS NOT NULL")
                                   .fetchone()[0])
            conn.execute("RESET maintenance_work_mem")
        return counts

    def check_consistency(self) -> dict[str, bool]:
        """For each vector table: is every stored vector searchable (no vectors yet, or a valid HNSW index)?"""
        result = {}
        with self.connection() as conn:
            for kind in VECTOR_TABLES:
                valid = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                                     [f"{kind}_embedding_hnsw"]).fetchone()
                if valid is None:
                    result[kind] = conn.execute(f"SELECT COUNT(*) FROM {kind} WHERE embedding IS NOT NULL"
                                                ).fetchone()[0] == 0
                else:
                    result[kind] = bool(valid[0])
        return result


@contextmanager
def scratch_schema(url: str, prefix: str) -> Iterator[str]:
    """A fresh, empty schema of the database ``url`` (a benchmark's library), as a URL whose search path starts
    there; dropped with everything in it afterwards."""
    schema = f"{prefix}_{secrets.token_hex(3)}"
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise StoreError(f"'{prefix}' cannot name a schema")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options={quote(f'-csearch_path={schema},public')}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])
