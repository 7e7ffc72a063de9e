"""The source of truth: one SQLite database (WAL mode) plus FAISS indices rebuilt from it on demand.

Rows that carry vectors (chunks, thoughts, memories) keep their embedding as a float32 blob in SQLite. Every
change to such rows bumps that table's generation in the same transaction. After the commit the change is
applied to the in-memory index and appended to its delta file (``copilot.storage.vectors.IndexLog``); the
index on disk is a snapshot named by its generation plus that delta. An index that cannot be brought exactly
to the database's generation (a crash between commit and append, a torn file) is rebuilt from SQLite, so the
two always agree. Another process's writes are caught up from the same delta.

Opening checks the database before anything uses it: a file that is not SQLite, a damaged or truncated one, a
directory in its place or one this user may not read or write raises :class:`StorageError`, one line naming the
file and what to do. The check is SQLite's ``PRAGMA quick_check`` (every page read once: about 0.15 s per 350 MB
from the page cache), so a damaged page deep in a table is found on open, not half-way through a command.

``Store.open`` gives the PostgreSQL store instead (``copilot.storage.postgres``) when ``COPILOT_DATABASE_URL`` is
set: the same repositories and the same interface, with the vectors in the rows.
"""

from __future__ import annotations

import importlib
import logging
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlite_utils import Database

from copilot.config import Settings
from copilot.errors import ComponentError
from copilot.storage.access_tokens import AccessTokenRepository
from copilot.storage.chunks import ChunkRepository
from copilot.storage.conversations import ConversationRepository
from copilot.storage.eval_runs import EvalRunRepository
from copilot.storage.follows import FollowRepository, RefreshRepository
from copilot.storage.fulltext import fts5_query, query_terms
from copilot.storage.memories import MemoryRepository
from copilot.storage.migrations import FULL_TEXT, VECTOR_TABLES, migrate, schema_version
from copilot.storage.papers import PaperRepository
from copilot.storage.profiles import ProfileRepository
from copilot.storage.queries import QueryRepository
from copilot.storage.rows import SQLITE, from_blob, to_blob
from copilot.storage.thoughts import ThoughtRepository
from copilot.storage.guests import GuestRepository
from copilot.storage.usage import UsageRepository
from copilot.storage.zotero import ZoteroRepository
from copilot.storage.vectors import IndexLog, IndexOptions, VectorIndex, remove_path
from copilot.types import VectorFilter, VectorMeta

if TYPE_CHECKING:
    from copilot.storage.postgres import PostgresStore  # which builds on this module

log = logging.getLogger(__name__)


class StoreError(ComponentError):
    """A storage operation was refused; the message says why."""


class StorageError(StoreError):
    """The database cannot be used (damaged, not a database, a directory, no permission); the message is one line
    naming the file and what to do, for the command line and the web app to show as it is."""


# SQLite's primary result codes that mean the file itself is the problem (not a locked or busy database).
_DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT"}
_UNREACHABLE = {"SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_AUTH"}


def unusable_database(db_path: Path, exc: BaseException) -> StorageError | None:
    """The :class:`StorageError` that ``exc`` (raised while opening or reading ``db_path``) stands for, or None
    when it is not about the file (a locked database, a bug)."""
    if isinstance(exc, StorageError):
        return exc
    where = str(db_path)
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return StorageError(f"the database {where} cannot be opened ({exc.strerror}): a file stands where its "
                            "folder should be; move that file away or choose another data directory")
    if isinstance(exc, PermissionError) or (isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error)):
        return StorageError(f"the database {where} cannot be opened ({getattr(exc, 'strerror', None) or exc}): "
                            "give this user read and write access to it and to its folder")
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    name = (getattr(exc, "sqlite_errorname", "") or "").split("_")
    code = "_".join(name[:2])  # SQLITE_IOERR_READ -> SQLITE_IOERR
    if db_path.is_dir():
        return StorageError(f"the database {where} is a directory, not a file: move it away, and the next start "
                            "creates an empty database there")
    if code in _DAMAGED or type(exc) is sqlite3.DatabaseError:
        return _damaged(db_path, str(exc))
    if code in _UNREACHABLE:
        return StorageError(f"the database {where} cannot be opened or written ({exc}): give this user read and "
                            "write access to it and to its folder, and check that the disk is not full or failing")
    return None


def _damaged(db_path: Path, detail: str) -> StorageError:
    # SQLite's integrity report lists one damaged page per line: the first, on the error's one line.
    lines = [" ".join(line.split()) for line in detail.splitlines() if line.strip() and "***" not in line]
    detail = lines[0] + (f"; {len(lines) - 1} more problems" if len(lines) > 1 else "") if lines else "unreadable"
    return StorageError(f"the database {db_path} is damaged or not a SQLite database ({detail}): move it away (e.g. "
                        "to copilot.db.broken) and put a backup in its place; without a backup, the next start "
                        "creates an empty library there")


def attach_repositories(store: Store | PostgresStore) -> None:
    """Give ``store`` its repositories: all SQL on records lives in them (one module per noun, in this package),
    written in the subset both backends speak."""
    store.papers = PaperRepository(store)
    store.chunks = ChunkRepository(store)
    store.thoughts = ThoughtRepository(store)
    store.memories = MemoryRepository(store)
    store.queries = QueryRepository(store)
    store.profiles = ProfileRepository(store)
    store.follows = FollowRepository(store)
    store.refreshes = RefreshRepository(store)
    store.eval_runs = EvalRunRepository(store)
    store.usage = UsageRepository(store)
    store.guests = GuestRepository(store)
    store.conversations = ConversationRepository(store)
    store.access_tokens = AccessTokenRepository(store)
    store.zotero = ZoteroRepository(store)


def checked_batch(records: Sequence[dict[str, Any]], vectors: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``vectors`` as float32 rows, one per record, and the columns every record has; :class:`StoreError` when
    they do not pair up or the records differ in their fields."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(records), -1) if records else vectors
    if len(records) != len(vectors):
        raise StoreError(f"{len(records)} records but {len(vectors)} vectors")
    columns = list(records[0].keys()) if records else []
    if any(list(r.keys()) != columns for r in records):
        raise StoreError("all records of one insert must have the same fields")
    return vectors, columns


class Store:
    """Records and vectors of one data directory."""

    backend = "sqlite"
    dialect = SQLITE

    def __init__(self, db_path: Path, index_dir: Path, index_options: IndexOptions | None = None) -> None:
        self.db_path = db_path
        self.index_dir = index_dir
        self._lock = threading.RLock()
        self.index_options = index_options or IndexOptions()
        self._indices: dict[str, tuple[int, VectorIndex | None]] = {}
        self._logs: dict[str, IndexLog] = {}
        self._depth = 0
        self._after_commit: list = []
        self._written: set[str] = set()  # vector tables the open write transaction has changed
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            index_dir.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are explicit (see ``transaction``), so a batch is all or nothing.
            self.conn = sqlite3.connect(db_path, timeout=30, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise unusable_database(db_path, exc) or exc
        try:
            self.db = Database(self.conn)
            self._check_readable()
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            # The rows behind each question's hits are read by id: a 64 MB page cache keeps the hot ones.
            self.conn.execute("PRAGMA cache_size=-65536")
            with self._lock:
                migrate(self.db)
        except (OSError, sqlite3.Error, StorageError) as exc:
            self.conn.close()
            raise unusable_database(db_path, exc) or exc
        attach_repositories(self)

    def _check_readable(self) -> None:
        """Raise :class:`StorageError` when the file is not a whole SQLite database (see the module notes)."""
        problems = [r[0] for r in self.conn.execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise _damaged(self.db_path, "; ".join(problems)[:200])

    @classmethod
    def open(cls, settings: Settings) -> Store:
        """The store of ``settings``' data directory; raises :class:`StorageError` when its database cannot be
        used."""
        if settings.database_url.get_secret_value():
            return open_database(settings)  # type: ignore[return-value] - the same interface on a server
        return cls(settings.db_path, settings.index_dir, cls.index_options_from(settings))

    @staticmethod
    def index_options_from(settings: Settings) -> IndexOptions:
        """The vector-index settings (``COPILOT_INDEX_*``)."""
        return IndexOptions(hnsw_threshold=settings.index_hnsw_threshold, hnsw_m=settings.index_hnsw_m,
                            ef_construction=settings.index_ef_construction, ef_search=settings.index_ef_search,
                            delta_fraction=settings.index_delta_fraction)

    def close(self) -> None:
        """Close the database; an index whose delta has grown is snapshotted first, so the next start is quick
        (replaying a delta re-inserts its vectors into the graph)."""
        with self._lock:
            try:
                for kind, (generation, index) in list(self._indices.items()):
                    if index is not None and generation == self.generation(kind):
                        self._log(kind).snapshot_if_delta(index, generation)
            except (OSError, sqlite3.Error):
                pass  # the files stay as they were: the next open replays the delta or rebuilds
            finally:
                self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return schema_version(self.db)

    @property
    def journal_mode(self) -> str:
        return str(self.conn.execute("PRAGMA journal_mode").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An immediate write transaction: committed on success, rolled back on any error.

        Re-entrant: a nested call joins the outer transaction. Index updates queued inside it run only after
        the outermost COMMIT, so an index never holds vectors of a transaction that was rolled back.
        """
        with self._lock:
            if self._depth > 0:
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            self._after_commit = []
            self._written = set()
            try:
                yield self.conn
            except BaseException:
                self._depth = 0
                self.conn.execute("ROLLBACK")
                self._after_commit = []
                self._written = set()
                raise
            self._depth = 0
            self._written = set()
            self.conn.execute("COMMIT")
            pending, self._after_commit = self._after_commit, []
            for apply in pending:
                apply()

    def serialize(self, key: str) -> None:
        """Inside a write transaction: wait until no other transaction holds ``key``, and hold it until this one
        ends (a check-then-write per user). SQLite's write transactions already run one at a time."""

    # ----- generations -------------------------------------------------------------------------------

    def generation(self, kind: str) -> int:
        _check_kind(kind)
        row = self.conn.execute("SELECT generation FROM vector_generations WHERE kind = ?", (kind,)).fetchone()
        return int(row[0]) if row else 0

    def _bump(self, conn: sqlite3.Connection, kind: str) -> int:
        conn.execute("UPDATE vector_generations SET generation = generation + 1, token = ? WHERE kind = ?",
                     (secrets.token_hex(8), kind))
        return int(conn.execute("SELECT generation FROM vector_generations WHERE kind = ?", (kind,)).fetchone()[0])

    def _token(self, kind: str) -> str | None:
        """The token of ``kind``'s current generation (what an index made for it must carry)."""
        row = self.conn.execute("SELECT token FROM vector_generations WHERE kind = ?", (kind,)).fetchone()
        return row[0] if row else None

    # ----- writes ------------------------------------------------------------------------------------

    def insert_with_vectors(
        self, kind: str, records: Sequence[dict[str, Any]], vectors: np.ndarray
    ) -> list[int]:
        """Insert ``records`` with their embeddings in one transaction, then update the index."""
        _check_kind(kind)
        vectors, columns = checked_batch(records, vectors)
        if not records:
            return []
        self._check_dimension(kind, vectors.shape[1])
        names = ", ".join([*columns, "embedding"])
        marks = ", ".join("?" * (len(columns) + 1))
        ids = []
        try:
            with self.transaction() as conn:
                for record, vector in zip(records, vectors, strict=True):
                    cursor = conn.execute(
                        f"INSERT INTO {kind} ({names}) VALUES ({marks})",
                        [*(record[c] for c in columns), to_blob(vector)],
                    )
                    ids.append(int(cursor.lastrowid))
                metas = self._metas(conn, kind, ids)
                self._queue(kind, self._bump(conn, kind), [("upsert", ids, vectors, metas)], dim=vectors.shape[1])
        except sqlite3.Error as exc:
            raise StoreError(f"could not store {len(records)} {kind} rows, nothing was written: {exc}") from exc
        return ids

    def update_vector(self, kind: str, item_id: int, fields: dict[str, Any], vector: np.ndarray) -> None:
        """Replace one row's fields and embedding (e.g. a merged thought keeping the better text)."""
        _check_kind(kind)
        assignments = ", ".join(f"{c} = ?" for c in [*fields, "embedding"])
        vector = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        self._check_dimension(kind, vector.shape[1])
        with self.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE {kind} SET {assignments} WHERE id = ?", [*fields.values(), to_blob(vector), item_id]
            )
            if cursor.rowcount != 1:
                raise StoreError(f"no {kind} row with id {item_id}")
            changes = [("upsert", [item_id], vector, self._metas(conn, kind, [item_id]))]
            self._queue(kind, self._bump(conn, kind), changes, dim=vector.shape[1])

    def _check_dimension(self, kind: str, dim: int) -> None:
        """Refuse vectors of another size than the index holds (another embedding model), before writing."""
        index = self.index(kind)
        if index is not None and index.dim != dim:
            raise StoreError(f"{kind} vectors have {index.dim} dimensions, these have {dim}: the embedding model "
                             "changed; nothing was written")

    def delete_with_vectors(self, kind: str, ids: Sequence[int]) -> int:
        """Delete rows and their vectors (joins the caller's transaction when there is one)."""
        _check_kind(kind)
        ids = [int(i) for i in ids]
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        with self.transaction() as conn:
            deleted = conn.execute(f"DELETE FROM {kind} WHERE id IN ({marks})", ids).rowcount
            self._queue(kind, self._bump(conn, kind), [("delete", ids)])
        return deleted

    def meta_changed(self, kind: str, ids: Sequence[int]) -> None:
        """Rows of ``kind`` whose filterable metadata (owner, paper, public, confidence, flagged; see
        :data:`VECTOR_META`) changed. Call it inside the transaction that changed them, so the index's filters
        follow the database."""
        _check_kind(kind)
        ids = [int(i) for i in ids]
        if not ids:
            return
        with self.transaction() as conn:
            found = self._metas(conn, kind, ids)
            held = [i for i, meta in zip(ids, found, strict=True) if meta is not None]
            if held:
                metas = [meta for meta in found if meta is not None]
                self._queue(kind, self._bump(conn, kind), [("meta", held, metas)])

    def _metas(self, conn: sqlite3.Connection, kind: str, ids: Sequence[int]) -> list[VectorMeta | None]:
        """The filterable metadata of rows ``ids`` (None for a row without a vector), in their order."""
        found: dict[int, VectorMeta] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            rows = conn.execute(f"SELECT * FROM ({VECTOR_META[kind]}) AS m WHERE id IN ({', '.join('?' * len(part))})",
                                part).fetchall()
            found.update((int(r[0]), _meta(r)) for r in rows)
        return [found.get(int(i)) for i in ids]

    # ----- indices -----------------------------------------------------------------------------------

    def _log(self, kind: str) -> IndexLog:
        log = self._logs.get(kind)
        if log is None:
            log = self._logs[kind] = IndexLog(self.index_dir, kind, self.index_options)
        return log

    def _queue(self, kind: str, generation: int, changes: list, dim: int | None = None) -> None:
        """Run ``_apply`` once the enclosing transaction has committed (called inside it, after the bump)."""
        token = self._token(kind)
        self._written.add(kind)
        self._after_commit.append(lambda: self._apply(kind, generation, changes, dim, token))

    def _apply(self, kind: str, generation: int, changes: list, dim: int | None = None,
               token: str | None = None) -> None:
        """Bring the in-memory index to ``generation``: apply ``changes`` if it was one step behind (and record
        them in the delta), else catch up from the files or rebuild."""
        with self._lock:
            try:
                loaded_gen, index = self._indices.get(kind, (-1, None))
                if loaded_gen == generation - 1 and (index is not None or dim is not None):
                    if index is None:
                        index = VectorIndex(int(dim), self.index_options)  # type: ignore[arg-type]
                    self._indices[kind] = (-1, index)  # not labelled until the change is whole
                    index.apply(changes)
                    index.token = token
                    self._indices[kind] = (generation, index)
                    self._log(kind).append(generation, changes, index)
                else:
                    self.index(kind)
            except Exception as exc:  # noqa: BLE001 - the write is committed: never report it as failed
                # The records hold the change; the index is reloaded (or rebuilt) from them on next use.
                self._indices.pop(kind, None)
                log.warning("the %s index could not follow generation %d (%s); it is reloaded on next use",
                            kind, generation, exc)

    def embeddings(self, kind: str, conn: sqlite3.Connection | None = None) -> tuple[np.ndarray, np.ndarray]:
        """All ids and embeddings of ``kind`` from SQLite, in id order."""
        _check_kind(kind)
        rows = (conn or self.conn).execute(
            f"SELECT id, embedding FROM {kind} WHERE embedding IS NOT NULL ORDER BY id"
        ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        matrix = np.vstack([from_blob(r[1]) for r in rows])
        return ids, matrix

    def index(self, kind: str) -> VectorIndex | None:
        """The index of ``kind`` matching the database now (loaded, caught up, or rebuilt); None when empty.

        Inside a write transaction it is the index as of the last commit: of any process, caught up first while
        the transaction has not changed ``kind`` itself (the write lock is held, so nothing can commit meanwhile
        and a check-then-write such as a thought's merge check sees every committed row), else this process's.
        """
        _check_kind(kind)
        with self._lock:
            loaded_gen, index = self._indices.get(kind, (-1, None))
            if self._depth > 0 and kind in self._written:
                # The database holds this transaction's uncommitted rows: keep the last committed index.
                return index
            current = self.generation(kind)
            if loaded_gen == current:
                return index
            if index is not None and 0 <= loaded_gen < current:
                self._indices[kind] = (-1, None)  # a failed catch-up leaves nothing half-applied behind
                try:
                    if (self._log(kind).catch_up(index, loaded_gen, current)  # another process wrote
                            and index.token == self._token(kind)):
                        self._indices[kind] = (current, index)
                        return index
                except Exception:  # noqa: BLE001 - an unreadable record: load the files afresh or rebuild
                    pass
            return self._load_or_rebuild(kind)

    def _load_or_rebuild(self, kind: str) -> VectorIndex | None:
        # Read the generation and the rows in one snapshot so the label matches the content.
        log = self._log(kind)
        inside = self.conn.in_transaction  # a write transaction's snapshot is one already
        if not inside:
            self.conn.execute("BEGIN")
        try:
            generation, token = self.generation(kind), self._token(kind)
            log.clean_leftovers()
            index = log.load(generation)
            if index is not None and index.token != token:
                index = None  # files made for another history of this generation number
            if index is None:
                index = self._rebuild(kind)
                if index is None:
                    log.remove_all()
                else:
                    index.token = token
                    log.write_snapshot(index, generation)
        finally:
            if not inside:
                self.conn.execute("COMMIT")
        self._indices[kind] = (generation, index)
        return index

    def _rebuild(self, kind: str) -> VectorIndex | None:
        """The index of ``kind`` built from the rows: every embedding with its metadata."""
        ids, matrix = self.embeddings(kind, self.conn)
        if not len(ids):
            return None
        found = self._metas(self.conn, kind, ids.tolist())
        return VectorIndex.build(matrix.shape[1], ids, matrix, [m or VectorMeta() for m in found],
                                 self.index_options)

    def search(
        self, kind: str, query: np.ndarray, k: int, where: VectorFilter | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` rows of ``kind`` nearest to ``query`` within ``where``, as (id, cosine), best first."""
        with self._lock:
            index = self.index(kind)
            if index is None:
                return []
            return index.search(query, k, where)

    def text_search(self, kind: str, query_text: str | None, k: int, where: VectorFilter | None = None
                    ) -> list[tuple[int, float]]:
        """The ``k`` rows of ``kind`` (chunks or thoughts) that best match the words of ``query_text`` within
        ``where``, as (id, BM25 score: higher is better), best first. Any text is safe to pass: it is read as
        words (:func:`~copilot.storage.fulltext.query_terms`), any of which may match; none leaves nothing."""
        _check_text_kind(kind)
        terms = query_terms(query_text)
        if not terms or k <= 0:
            return []
        condition, params = filter_sql(where or VectorFilter())
        fts = f"{kind}_fts"
        with self._lock:  # the shared connection sees another thread's open transaction: wait until it ends
            rows = self.conn.execute(
                f"SELECT m.id, bm25({fts}) AS rank FROM {fts} JOIN ({VECTOR_META[kind]}) AS m ON m.id = {fts}.rowid "
                f"WHERE {fts} MATCH ? AND {condition} ORDER BY rank, m.id LIMIT ?",
                [fts5_query(terms), *params, int(k)]).fetchall()
        return [(int(i), -float(rank)) for i, rank in rows]

    def index_bytes(self, kind: str) -> int:
        """What ``kind``'s index holds in memory (vectors, graph, metadata); 0 while it is empty."""
        index = self.index(kind)
        return index.memory_bytes() if index is not None else 0

    def count(self, kind: str, where: VectorFilter | None = None) -> int:
        """How many rows of ``kind`` with a vector lie within ``where``."""
        sql, params = filter_sql(where or VectorFilter())
        return int(self.conn.execute(f"SELECT COUNT(*) FROM ({VECTOR_META[kind]}) AS m WHERE {sql}",
                                     params).fetchone()[0])

    def reindex(self, kinds: Sequence[str] = VECTOR_TABLES) -> dict[str, int]:
        """Throw away every index file of ``kinds`` and rebuild them from SQLite, and their full-text indices;
        returns vectors per kind."""
        counts = {}
        with self._lock:
            for kind in kinds:
                _check_kind(kind)
                self._log(kind).remove_all()
                self._log(kind).clean_leftovers()
                self._indices.pop(kind, None)
                index = self._load_or_rebuild(kind)
                counts[kind] = len(index) if index is not None else 0
                if kind in FULL_TEXT:  # the full-text index too, from the same rows
                    with self.transaction() as conn:
                        conn.execute(f"INSERT INTO {kind}_fts ({kind}_fts) VALUES ('rebuild')")
        return counts

    def check_consistency(self) -> dict[str, bool]:
        """For each vector table: does the index hold exactly the rows with embeddings, each with the metadata
        the database gives it (what the filters see)?"""
        result = {}
        with self._lock:
            for kind in VECTOR_TABLES:
                index = self.index(kind)
                rows = {int(r[0]): _meta(r) for r in self.conn.execute(VECTOR_META[kind])}
                held = index.metas() if index is not None else {}
                result[kind] = held == rows
        return result

    def stale_index_files(self, *, remove: bool = False) -> list[tuple[Path, int]]:
        """Index files no load reads (old snapshots and deltas, temporary files of killed writers), with their sizes
        in bytes; ``remove`` deletes them. Each kind is examined under its writers' lock, at the database's current
        generation."""
        found = []
        with self._lock:
            for kind in VECTOR_TABLES:
                log = self._log(kind)
                with log.locked():
                    for path in log.stale_files(self.generation(kind)):
                        found.append((path, _disk_size(path)))
                        if remove:
                            remove_path(path)
        return found

    def unreferenced_files(self, directory: Path, *, remove: bool = False,
                           live: Callable[[Path], bool] = lambda path: False) -> list[tuple[Path, int]]:
        """Files in ``directory`` (the stored PDFs) that no paper row names, with their sizes; ``remove`` deletes
        them. Examined inside a write transaction, so no add is between placing its file and committing its row;
        ``live(path)`` spares a file a running process is still writing."""
        found = []
        if not directory.is_dir():
            return found
        with self.transaction():
            named = self.papers.stored_file_names()
            for path in sorted(directory.iterdir()):
                if path.name in named or live(path):
                    continue
                found.append((path, _disk_size(path)))
                if remove:
                    remove_path(path)
        return found

    def integrity_ok(self) -> bool:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# Each vector table's filterable metadata, one row per vector: what a VectorFilter is evaluated against.
VECTOR_META = {
    "chunks": "SELECT c.id, p.user_id AS owner, c.paper_id AS paper, 0 AS public, CAST(NULL AS REAL) AS confidence, "
              "0 AS flagged FROM chunks c LEFT JOIN papers p ON p.id = c.paper_id WHERE c.embedding IS NOT NULL",
    "thoughts": "SELECT id, user_id AS owner, NULL AS paper, COALESCE(public, 0) AS public, confidence, "
                "COALESCE(flagged, 0) AS flagged FROM thoughts WHERE embedding IS NOT NULL",
    "memories": "SELECT id, user_id AS owner, NULL AS paper, 0 AS public, CAST(NULL AS REAL) AS confidence, "
                "0 AS flagged FROM memories WHERE embedding IS NOT NULL",
}


def _meta(row: Sequence[Any]) -> VectorMeta:
    """One row of :data:`VECTOR_META` as the index's metadata."""
    _, owner, paper, public, confidence, flagged = row
    return VectorMeta(owner=owner, paper=paper, public=bool(public),
                      confidence=None if confidence is None else float(confidence), flagged=bool(flagged))


def filter_sql(where: VectorFilter) -> tuple[str, list[Any]]:
    """``where`` as a SQL condition over the columns of :data:`VECTOR_META`, with its parameters."""
    terms, params = [], []
    if where.scoped_by_owner:
        owners = []
        if where.owner is not None:
            owners.append("owner = ?")
            params.append(where.owner)
        if where.shared:
            owners.append("owner IS NULL")
        if where.public:
            owners.append("public = 1")
        terms.append(f"({' OR '.join(owners)})")
    if where.papers is not None:
        terms.append(f"paper IN ({', '.join('?' * len(where.papers))})" if where.papers else "FALSE")
        params += sorted(where.papers)
    if where.min_confidence is not None:
        terms.append("confidence >= ?")
        params.append(where.min_confidence)
    if where.unflagged:
        terms.append("flagged = 0")
    return " AND ".join(terms) or "TRUE", params


def _disk_size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def _check_text_kind(kind: str) -> None:
    if kind not in FULL_TEXT:
        raise StoreError(f"'{kind}' has no full-text index (one of {', '.join(FULL_TEXT)})")


def _check_kind(kind: str) -> None:
    if kind not in VECTOR_TABLES:
        raise StoreError(f"'{kind}' is not a vector table (one of {', '.join(VECTOR_TABLES)})")


# Database servers by URL scheme (``COPILOT_DATABASE_URL``): module and class, imported only when named.
SERVER_BACKENDS = {"postgresql": ("copilot.storage.postgres", "PostgresStore"),
                   "postgres": ("copilot.storage.postgres", "PostgresStore")}


def open_database(settings: Settings) -> PostgresStore:
    """The store on the database server that ``COPILOT_DATABASE_URL`` names, chosen by the URL's scheme."""
    backend = settings.storage_backend
    if backend not in SERVER_BACKENDS:
        raise StoreError(f"COPILOT_DATABASE_URL names a '{backend}' database; supported: "
                         f"{', '.join(sorted(SERVER_BACKENDS))} (or leave it empty for the embedded SQLite)")
    module, name = SERVER_BACKENDS[backend]
    return getattr(importlib.import_module(module), name).open(settings)
