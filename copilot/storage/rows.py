"""Small helpers the storage modules share: timestamps, vector blobs, reading rows by column name and
(de)serialising JSON columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np


def utc_now() -> str:
    """The timestamp every record carries: UTC, ISO 8601, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def to_blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes | np.ndarray) -> np.ndarray:
    """A stored embedding as a float32 vector: SQLite keeps a blob, PostgreSQL hands back the array itself."""
    return blob if isinstance(blob, np.ndarray) else np.frombuffer(blob, dtype=np.float32)


def fetch_all(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Every row of ``sql`` as a dict keyed by column name (the repository turns it into a record)."""
    cursor = conn.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def fetch_one(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
    rows = fetch_all(conn, sql, params)
    return rows[0] if rows else None


def inserted_id(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> int:
    """The id an ``INSERT ... RETURNING id`` gave its new row (read to the end, so the statement is finished)."""
    return int(conn.execute(sql, list(params)).fetchall()[0][0])


@dataclass(frozen=True)
class Dialect:
    """The few SQL fragments that differ between the backends, for repositories that need one."""

    name: str
    embedding_bytes: str  # bytes of a row's embedding, as an expression over its ``embedding`` column
    skip_locked: str  # ends a SELECT that claims rows: rows another transaction holds are passed over


# SQLite has no row locks: its write transactions (BEGIN IMMEDIATE) already run one at a time.
SQLITE = Dialect("sqlite", embedding_bytes="LENGTH(embedding)", skip_locked="")
POSTGRESQL = Dialect("postgresql", embedding_bytes="(vector_dims(embedding) * 4)",
                     skip_locked=" FOR UPDATE SKIP LOCKED")


def marks(values: Sequence[Any]) -> str:
    """``?, ?, ?``: one placeholder per value of an ``IN (...)`` list."""
    return ", ".join("?" * len(values))


def loads(text: str | None, default: Any) -> Any:  # noqa: ANN401 - whatever the column holds
    """A JSON column's value, or ``default`` when it is empty."""
    return json.loads(text) if text else default


def dumps_or_none(value: Any) -> str | None:  # noqa: ANN401
    """JSON for a column that stays NULL when there is nothing to keep."""
    return json.dumps(value) if value else None
