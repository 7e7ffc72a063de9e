"""Copying an embedded instance (SQLite) into PostgreSQL, and checking the copy: ``python -m copilot migrate``.

Every table that holds user records is copied row by row with its ids (:data:`TABLES`, in an order that puts
each row after the rows it refers to), so provenance edges, a query's thought and a feedback's query still point
at the same rows. The source is read in batches of ``batch`` rows (keyset by ``rowid``, inside one read snapshot)
and each batch is one transaction on the target, ``INSERT … ON CONFLICT DO NOTHING``; a batch whose keys the
target already holds is not sent again. So a second run, or a run after an interrupted one, adds only what is
missing and never duplicates a row; a row already in the target is kept as it is (not updated). Afterwards each
identity sequence is set past the largest id, so a row written on PostgreSQL gets a fresh id. Vectors go in
under ``PostgresStore.bulk_load`` (the HNSW graphs are built once at the end): only for a target nobody else
writes to meanwhile, and the app should not write to the source either.

The check has two parts:

- **rows**: for each table, how many of the source's rows are in the target, by primary key (batch by batch);
  it passes when all of them are. The target's own count is reported beside it: rows written there since (or
  before) the copy are not a failure.
- **retrievals**: ``samples`` stored vectors of each vector table, chosen with a fixed seed, are searched on both
  stores (``store.search``, k 10) under several filters (none; the vector's owner with the shared rows; its
  paper, for chunks; its owner with the public pool, unflagged, for thoughts). Both sides may be approximate (the
  embedded index turns into an HNSW graph above ``COPILOT_INDEX_HNSW_THRESHOLD`` vectors; pgvector's index is
  one), so the lists are not required to be identical: the check passes when, over each table's searches, at
  least 95% of the source's ids are in the target's answers (recall against the source), and every id both
  answers hold has the same score within 1e-4 (the vectors arrived unchanged). A source id the target left out
  for another id of the same score counts as found: equal neighbours are interchangeable and each side breaks
  the tie its own way (twelve memories written from one template give ten equal scores in a row). On the test
  library (95 chunks, below the threshold) every search finds the source's ids.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import psycopg

from copilot.storage.migrations import FULL_TEXT, VECTOR_TABLES
from copilot.storage.postgres import PostgresStore, _reason
from copilot.storage.rows import from_blob, marks
from copilot.storage.store import VECTOR_META, Store, StoreError, _meta
from copilot.types import VectorFilter

# Tables of records with their primary keys, parents before the rows that point at them. Left out:
# ``_migrations`` (each backend keeps its own), ``vector_generations`` (the embedded index's bookkeeping) and the
# full-text indices' tables (FTS5's; PostgreSQL indexes the copied rows itself).
TABLES: dict[str, tuple[str, ...]] = {
    "users": ("id",),
    "papers": ("id",),
    "chunks": ("id",),
    "thoughts": ("id",),
    "thought_sources": ("thought_id", "source_kind", "source_id"),
    "memories": ("id",),
    "queries": ("id",),
    "feedback": ("id",),
    "conversations": ("id",),
    "conversation_turns": ("id",),
    "profiles": ("user_id",),
    "follows": ("user_id", "category"),
    "refreshes": ("id",),
    "eval_runs": ("id",),
    "usage_events": ("id",),
    "access_tokens": ("id",),
    "zotero_connections": ("user_id",),
    "zotero_items": ("user_id", "item_key"),
}
NOT_COPIED = ("_migrations", "vector_generations",
              *(f"{table}_fts{part}" for table in FULL_TEXT for part in ("", "_data", "_idx", "_docsize", "_config")))

BATCH = 1000
SAMPLES = 20
SEED = 20_200
K = 10
MIN_RECALL = 0.95
SCORE_TOLERANCE = 1e-4

Progress = Callable[[str, int, int], None]  # (table, rows done, rows in the source)


@dataclass
class TableCheck:
    """One table after the copy: rows in the source, how many of them the target holds, rows in the target."""

    table: str
    source: int
    present: int
    target: int

    @property
    def ok(self) -> bool:
        return self.present == self.source


@dataclass
class RetrievalCheck:
    """The sampled searches: how many, the recall of the source's ids in the target's answers, score gaps."""

    searches: int = 0
    expected: int = 0
    found: int = 0
    exact: int = 0  # searches whose id lists were identical
    tied: int = 0  # source ids the target swapped for another of the same score at the k-th place
    max_score_gap: float = 0.0
    failures: list[str] = field(default_factory=list)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # vector table -> [expected, found]

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    def recall_of(self, kind: str) -> float:
        expected, found = self.by_kind.get(kind, (0, 0))
        return found / expected if expected else 1.0

    @property
    def ok(self) -> bool:
        return all(self.recall_of(k) >= MIN_RECALL for k in self.by_kind) and self.max_score_gap <= SCORE_TOLERANCE


@dataclass
class CopyReport:
    """What a copy did and what its check found."""

    target: str
    tables: list[TableCheck]
    retrievals: RetrievalCheck
    sequences: dict[str, int]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables) and self.retrievals.ok

    def problem(self) -> str:
        """The check's failure in one line ('' when it passed)."""
        problems = [f"{t.table}: {t.present} of {t.source} rows in the target" for t in self.tables if not t.ok]
        r = self.retrievals
        for kind in r.by_kind:
            if r.recall_of(kind) < MIN_RECALL:
                miss = next((f for f in r.failures if f.startswith(kind)), "?")
                problems.append(f"{kind} searches: recall {r.recall_of(kind):.3f} of the source's top-{K} ids (at "
                                f"least {MIN_RECALL} needed; first miss: {miss})")
        if r.max_score_gap > SCORE_TOLERANCE:
            problems.append(f"retrievals: a score differs by {r.max_score_gap:.2g} (vectors changed on the way)")
        return "; ".join(problems)

    def verdict(self) -> str:
        rows = sum(t.source for t in self.tables)
        r = self.retrievals
        if self.ok:
            return (f"copied and checked: {rows} rows in {len(self.tables)} tables are all in {self.target}; "
                    f"{r.searches} sampled searches agree (recall {r.recall:.3f}, {r.exact} identical)")
        return f"the copy to {self.target} failed its check: {self.problem()}"

    def as_dict(self) -> dict[str, Any]:
        r = self.retrievals
        return {"ok": self.ok, "target": self.target, "tables": [asdict(t) | {"ok": t.ok} for t in self.tables],
                "retrievals": {"searches": r.searches, "recall": round(r.recall, 4), "identical": r.exact,
                               "tied": r.tied, "max_score_gap": r.max_score_gap, "min_recall": MIN_RECALL, "k": K,
                               "recall_by_table": {k: round(r.recall_of(k), 4) for k in r.by_kind}, "ok": r.ok,
                               "misses": r.failures[:10]},
                "sequences": self.sequences, "verdict": self.verdict()}


def copy_store(source: Store, target: PostgresStore, *, batch: int = BATCH, samples: int = SAMPLES,
               progress: Progress | None = None) -> CopyReport:
    """Copy every record table of the SQLite ``source`` (a :class:`~copilot.storage.store.Store`) into the
    PostgreSQL ``target`` (a :class:`~copilot.storage.postgres.PostgresStore`) with their ids, then check it
    (see the module notes). Safe to run again: rows already there are skipped."""
    if getattr(source, "backend", "") != "sqlite" or getattr(target, "backend", "") != "postgresql":
        raise StoreError("copying goes from an embedded (SQLite) store into a PostgreSQL one")
    _check_tables(source)
    _check_dimensions(source, target)
    try:
        with _snapshot(source):
            with target.bulk_load():
                for table in TABLES:
                    _copy_table(source, target, table, batch, progress)
            sequences = _advance_sequences(target)
            checks = [_check_table(source, target, table, batch) for table in TABLES]
        retrievals = check_retrievals(source, target, samples=samples)
    except psycopg.Error as exc:  # a lost connection is already a StorageError naming the host
        raise StoreError(f"the copy to {target.where} stopped: {_reason(exc, '')}") from exc
    return CopyReport(target.where, checks, retrievals, sequences)


def _check_tables(source: Store) -> None:
    """Refuse a source with a table this copy does not know (a migration added one and :data:`TABLES` lags)."""
    names = {r[0] for r in source.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                               "AND name NOT LIKE 'sqlite_%'")}
    unknown = sorted(names - set(TABLES) - set(NOT_COPIED))
    if unknown:
        raise StoreError(f"the embedded database has tables this copy does not know: {', '.join(unknown)}")


def _check_dimensions(source: Store, target: PostgresStore) -> None:
    """Refuse, before copying anything, vectors of another size than the target's columns hold."""
    with target.connection() as conn:
        for kind in VECTOR_TABLES:
            row = source.conn.execute(f"SELECT LENGTH(embedding) FROM {kind} WHERE embedding IS NOT NULL LIMIT 1"
                                      ).fetchone()
            held = target._dimension(conn, kind)
            if row is not None and held not in (-1, row[0] // 4):
                raise StoreError(f"{kind} vectors in {target.where} have {held} dimensions, the embedded "
                                 f"instance's have {row[0] // 4} (another embedding model): nothing was copied")


@contextmanager
def _snapshot(source: Store) -> Iterator[None]:
    """One read transaction on the source: every batch and count sees the same database."""
    source.conn.execute("BEGIN")
    try:
        yield
    finally:
        source.conn.execute("COMMIT")


def _source_columns(source: Store, table: str) -> list[str]:
    return [r[1] for r in source.conn.execute(f"PRAGMA table_info({table})")]


def _target_columns(target: PostgresStore, table: str) -> list[str]:
    with target.connection() as conn:
        return [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s ORDER BY ordinal_position", [table])]


def _count(source: Store, table: str) -> int:
    return int(source.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _copy_table(source: Store, target: PostgresStore, table: str, batch: int, progress: Progress | None) -> None:
    """Copy ``table`` in batches of ``batch`` rows, one target transaction each."""
    wanted = _target_columns(target, table)
    columns = [c for c in _source_columns(source, table) if c in wanted]
    # ``follows`` keeps SQLite's implicit rowid as a column of its own on PostgreSQL (its insertion order).
    selected = [*columns, "rowid"] if "rowid" in wanted and "rowid" not in columns else columns
    embedding = selected.index("embedding") if "embedding" in selected else None
    total, done, last = _count(source, table), 0, None
    insert = (f"INSERT INTO {table} ({', '.join(selected)}) VALUES ({', '.join(['%s'] * len(selected))}) "
              "ON CONFLICT DO NOTHING")
    if progress and not total:
        progress(table, 0, 0)
    while True:
        after = "" if last is None else "WHERE rowid > ?"
        rows = source.conn.execute(f"SELECT rowid, {', '.join(selected)} FROM {table} {after} ORDER BY rowid "
                                   "LIMIT ?", ([] if last is None else [last]) + [batch]).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        values = [list(r[1:]) for r in rows]
        dim = None
        if embedding is not None:
            for row in values:
                if row[embedding] is not None:
                    row[embedding] = from_blob(row[embedding])
                    dim = len(row[embedding])
        keys = [[row[selected.index(c)] for c in TABLES[table]] for row in values]
        with target.transaction(), target.connection() as conn:
            if _present(conn, table, keys) < len(keys):  # a batch already there (a second run) is not sent again
                if dim is not None:
                    target._fix_dimension(conn, table, dim)  # the first vectors give the column its dimension
                with conn.cursor() as cursor:
                    cursor.executemany(insert, values)
        done += len(rows)
        if progress:
            progress(table, done, total)


def _advance_sequences(target: PostgresStore) -> dict[str, int]:
    """Set each identity column's sequence past the largest value in its table (never back), so rows written
    after the copy get fresh ids; returns the value each sequence now stands at, by ``table.column``."""
    now = {}
    with target.connection() as conn:
        identities = conn.execute("SELECT table_name, column_name FROM information_schema.columns WHERE "
                                  "table_schema = current_schema() AND is_identity = 'YES' ORDER BY table_name"
                                  ).fetchall()
        for table, column in identities:
            if table not in TABLES:
                continue
            sequence = conn.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, column]).fetchone()[0]
            row = conn.execute(
                f"SELECT setval(%s::regclass, v) FROM (SELECT GREATEST((SELECT MAX({column}) FROM {table}), "
                "pg_sequence_last_value(%s::regclass)) AS v) AS q WHERE v IS NOT NULL", [sequence, sequence]).fetchone()
            if row is not None:
                now[f"{table}.{column}"] = int(row[0])
    return now


def _check_table(source: Store, target: PostgresStore, table: str, batch: int) -> TableCheck:
    """How many of ``table``'s source rows the target holds, matched by primary key."""
    key = TABLES[table]
    present, last = 0, None
    while True:
        after = "" if last is None else "WHERE rowid > ?"
        rows = source.conn.execute(f"SELECT rowid, {', '.join(key)} FROM {table} {after} ORDER BY rowid LIMIT ?",
                                   ([] if last is None else [last]) + [batch]).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        with target.connection() as conn:
            present += _present(conn, table, [r[1:] for r in rows])
    with target.connection() as conn:
        in_target = int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    return TableCheck(table, _count(source, table), present, in_target)


def _present(conn: psycopg.Connection, table: str, keys: list) -> int:
    """How many of these primary keys of ``table`` the target holds."""
    key = TABLES[table]
    tuples = ", ".join([f"({', '.join(['%s'] * len(key))})"] * len(keys))
    return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE ({', '.join(key)}) IN (VALUES {tuples})",
                            [v for k in keys for v in k]).fetchone()[0])


# ----- retrievals ------------------------------------------------------------------------------------------

def _filters(kind: str, owner: str | None, paper: str | None) -> list[VectorFilter]:
    filters = [VectorFilter()]
    if owner is not None:
        filters.append(VectorFilter(owner=owner, shared=True))
    if kind == "chunks" and paper is not None:
        filters.append(VectorFilter(papers=frozenset([paper])))
    if kind == "thoughts" and owner is not None:
        filters.append(VectorFilter(owner=owner, public=True, unflagged=True))
    return filters


def check_retrievals(source: Store, target: PostgresStore, *, samples: int = SAMPLES, seed: int = SEED,
                     k: int = K) -> RetrievalCheck:
    """Search ``samples`` stored vectors of each vector table on both stores (see the module notes)."""
    result = RetrievalCheck()
    rng = random.Random(seed)
    for kind in VECTOR_TABLES:
        # Each stored vector's owner and paper, as the index reads them: one statement per table.
        metas = {int(row[0]): _meta(row) for row in source.conn.execute(VECTOR_META[kind])}
        chosen = sorted(rng.sample(sorted(metas), min(samples, len(metas))))
        vectors = {int(i): from_blob(blob) for i, blob in source.conn.execute(
            f"SELECT id, embedding FROM {kind} WHERE id IN ({marks(chosen)})", chosen)} if chosen else {}
        for item_id in chosen:
            vector, meta = vectors[item_id], metas[item_id]
            for where in _filters(kind, meta.owner, meta.paper):
                _compare(result, kind, item_id, where, source.search(kind, vector, k, where),
                         target.search(kind, vector, k, where))
    return result


def _compare(result: RetrievalCheck, kind: str, item_id: int, where: VectorFilter,
             expected: list[tuple[int, float]], found: list[tuple[int, float]]) -> None:
    """Score one search: each of the source's ids the target also returned is found, and so is one the target
    left out for another id of the same score (a tie, which either side may break its own way)."""
    result.searches += 1
    want, got = dict(expected), dict(found)
    hits = set(want) & set(got)
    extras = sorted(got[j] for j in set(got) - hits)
    tied = []
    for i in sorted(set(want) - hits, key=want.get):
        match = next((n for n, score in enumerate(extras) if abs(score - want[i]) <= SCORE_TOLERANCE), None)
        if match is not None:
            tied.append(i)
            extras.pop(match)
    result.expected += len(want)
    result.found += len(hits) + len(tied)
    counts = result.by_kind.setdefault(kind, [0, 0])
    counts[0] += len(want)
    counts[1] += len(hits) + len(tied)
    result.tied += len(tied)
    result.exact += [i for i, _ in expected] == [i for i, _ in found]
    if hits:
        result.max_score_gap = max(result.max_score_gap, float(np.max([abs(want[i] - got[i]) for i in hits])))
    if len(hits) + len(tied) < len(want):
        result.failures.append(f"{kind} #{item_id} {_described(where)}: {len(hits) + len(tied)} of {len(want)}")


def _described(where: VectorFilter) -> str:
    """A filter by the fields it sets: ``owner='ada' shared=True``, or ``unfiltered``."""
    fields = {name: value for name, value in vars(where).items() if value not in (None, False)}
    return " ".join(f"{name}={sorted(value) if isinstance(value, frozenset) else value!r}"
                    for name, value in fields.items()) or "unfiltered"
