"""Followed arXiv categories per user, and the record of each library refresh."""

from __future__ import annotations

import json
from collections.abc import Sequence

from typing import TYPE_CHECKING

from copilot.storage.rows import fetch_one, inserted_id, loads, utc_now
from copilot.types import Refresh

if TYPE_CHECKING:
    from copilot.storage.store import Store


class FollowRepository:
    """Reads and writes ``follows``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def of(self, user_id: str) -> list[str]:
        """The categories ``user_id`` follows, in the order they were added."""
        return [r[0] for r in self._store.conn.execute(
            "SELECT category FROM follows WHERE user_id = ? ORDER BY created_at, rowid", [user_id])]

    def replace(self, user_id: str, categories: Sequence[str]) -> None:
        """``user_id`` follows exactly ``categories`` from now on (in that order)."""
        now = utc_now()
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM follows WHERE user_id = ?", [user_id])
            conn.executemany("INSERT INTO follows (user_id, category, created_at) VALUES (?, ?, ?)",
                             [(user_id, category, now) for category in categories])

    def categories(self) -> list[str]:
        """Every category some user follows."""
        return [r[0] for r in self._store.conn.execute("SELECT DISTINCT category FROM follows ORDER BY category")]


class RefreshRepository:
    """Reads and writes ``refreshes``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, *, user_id: str | None, categories: Sequence[str], added: Sequence[str], skipped: int,
            errors: Sequence[str], started_at: str, finished_at: str) -> int:
        with self._store.transaction() as conn:
            return inserted_id(conn,
                "INSERT INTO refreshes (user_id, categories, added, skipped, errors, started_at, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                [user_id, json.dumps(list(categories)), json.dumps(list(added)), skipped, json.dumps(list(errors)),
                 started_at, finished_at])

    def last(self, user_id: str | None = None) -> Refresh | None:
        """The newest refresh ``user_id`` ran or the scheduler ran for everyone (any refresh when None)."""
        scope, args = ("WHERE user_id = ? OR user_id IS NULL", [user_id]) if user_id is not None else ("", [])
        row = fetch_one(self._store.conn,
                        "SELECT id, user_id, categories, added, skipped, errors, started_at, finished_at FROM refreshes "
                        f"{scope} ORDER BY id DESC LIMIT 1", args)
        if row is None:
            return None
        return Refresh(**(row | {"categories": loads(row["categories"], []), "added": loads(row["added"], []),
                                 "errors": loads(row["errors"], [])}))
