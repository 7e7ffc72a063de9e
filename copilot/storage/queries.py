"""Answered questions and the feedback on them; a user reads only their own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from copilot.storage.rows import fetch_all, fetch_one, inserted_id, loads, utc_now
from copilot.types import Feedback, Query

if TYPE_CHECKING:
    from copilot.storage.store import Store


def _query(row: dict[str, Any]) -> Query:
    return Query(**(row | {"retrieved": loads(row["retrieved"], []), "timings": loads(row["timings"], {})}))


class QueryRepository:
    """Reads and writes ``queries`` and ``feedback``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, user_id: str, text: str, answer: str, retrieved: list[dict[str, Any]],
            timings: dict[str, float]) -> int:
        """Record an answer as soon as it is given: its thought is 'pending' and it cost one LLM call so far."""
        with self._store.transaction() as conn:
            return inserted_id(conn,
                "INSERT INTO queries (user_id, text, answer, retrieved, thought_outcome, timings, llm_calls, "
                "created_at) VALUES (?, ?, ?, ?, 'pending', ?, 1, ?) RETURNING id",
                [user_id, text, answer, json.dumps(retrieved), json.dumps(timings), utc_now()])

    def record_outcome(self, query_id: int, *, thought_id: int | None, outcome: str, reason: str,
                       timings: dict[str, float], llm_calls: int) -> None:
        """Complete the record with what became of the answer's thought."""
        with self._store.transaction() as conn:
            conn.execute("UPDATE queries SET thought_id = ?, thought_outcome = ?, thought_reason = ?, timings = ?, "
                         "llm_calls = ? WHERE id = ?",
                         [thought_id, outcome, reason, json.dumps(timings), llm_calls, query_id])

    def get(self, query_id: int, user_id: str | None = None) -> Query | None:
        """The query, or None when there is none or it is not ``user_id``'s."""
        row = fetch_one(self._store.conn, "SELECT * FROM queries WHERE id = ?", [int(query_id)])
        if row is None or (user_id is not None and row["user_id"] != user_id):
            return None
        return _query(row)

    def retrieved(self, user_id: str | None = None) -> list[list[dict[str, Any]]]:
        """What each of the user's answers (every answer when None) was built from, in order."""
        where, params = ("WHERE user_id = ?", [user_id]) if user_id is not None else ("", [])
        return [json.loads(items) for (items,) in self._store.conn.execute(
            f"SELECT retrieved FROM queries {where}", params) if items]

    def add_feedback(self, query_id: int, user_id: str, value: int) -> int:
        with self._store.transaction() as conn:
            return inserted_id(conn, "INSERT INTO feedback (query_id, user_id, value, created_at) VALUES (?, ?, ?, ?) "
                                    "RETURNING id", [query_id, user_id, value, utc_now()])

    def feedback(self, user_id: str) -> list[Feedback]:
        """The user's feedback, oldest first."""
        return [Feedback(**r) for r in fetch_all(
            self._store.conn, "SELECT id, query_id, user_id, value, created_at FROM feedback WHERE user_id = ? "
            "ORDER BY id", [user_id])]
