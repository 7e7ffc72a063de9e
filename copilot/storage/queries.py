"""Answered questions and the feedback on them; a user reads only their own.

A query whose thought is 'pending' is also the job of writing that thought (:class:`~copilot.types.ThoughtJob`):
its row holds the question, the answer, the sources in their order and the share flag, and which worker claimed
it and when (``thought_claim``, ``thought_claimed_at``). A claim is a lease: its worker renews it while it lives,
and a job whose lease ran out (its replica died) is claimed again by the next worker that looks. Claiming is one
write transaction, with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two replicas never claim one job at once;
the outcome is recorded only while the job is still pending, so a job finished elsewhere is never finished twice.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from copilot.storage.rows import fetch_all, fetch_one, inserted_id, loads, marks, utc_now
from copilot.types import Feedback, Query, ThoughtJob

if TYPE_CHECKING:
    from copilot.storage.store import Store


# What a claimed job is read back as.
_JOB = "id, user_id, text, answer, retrieved, thought_public, timings, created_at"


def _job(row: tuple) -> ThoughtJob:
    query_id, user_id, text, answer, retrieved, public, timings, created_at = row
    return ThoughtJob(int(query_id), user_id, text, answer or "", loads(retrieved, []), bool(public),
                      loads(timings, {}), created_at)


def _query(row: dict[str, Any]) -> Query:
    return Query(**(row | {"retrieved": loads(row["retrieved"], []), "timings": loads(row["timings"], {})}))


class QueryRepository:
    """Reads and writes ``queries`` and ``feedback``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, user_id: str, text: str, answer: str, retrieved: list[dict[str, Any]],
            timings: dict[str, float], *, public: bool = False, claim: str | None = None) -> int:
        """Record an answer as soon as it is given: its thought is 'pending' (the job of writing it, claimed by
        worker ``claim`` from now on; ``public``: the thought goes to the public pool) and it cost one LLM call
        so far."""
        with self._store.transaction() as conn:
            return inserted_id(conn,
                "INSERT INTO queries (user_id, text, answer, retrieved, thought_outcome, timings, llm_calls, "
                "created_at, thought_public, thought_claim, thought_claimed_at) "
                "VALUES (?, ?, ?, ?, 'pending', ?, 1, ?, ?, ?, ?) RETURNING id",
                [user_id, text, answer, json.dumps(retrieved), json.dumps(timings), utc_now(), int(public), claim,
                 time.time() if claim else None])

    def record_outcome(self, query_id: int, *, thought_id: int | None, outcome: str, reason: str,
                       timings: dict[str, float], llm_calls: int) -> bool:
        """Complete the record with what became of the answer's thought (joins the caller's transaction, the one
        that stored the thought). False, changing nothing, when it was already completed (by another worker)."""
        with self._store.transaction() as conn:
            return conn.execute(
                "UPDATE queries SET thought_id = ?, thought_outcome = ?, thought_reason = ?, timings = ?, "
                "llm_calls = ?, thought_claim = NULL WHERE id = ? AND thought_outcome = 'pending'",
                [thought_id, outcome, reason, json.dumps(timings), llm_calls, query_id]).rowcount == 1

    # ----- thought jobs ------------------------------------------------------------------------------

    def claim(self, query_id: int, worker: str, lease_s: float) -> ThoughtJob | None:
        """Claim the job of query ``query_id`` for ``worker``: None when it is no longer pending, or another
        worker's lease on it still runs."""
        now = time.time()
        with self._store.transaction() as conn:
            row = conn.execute(
                f"UPDATE queries SET thought_claim = ?, thought_claimed_at = ? WHERE id = ? AND "
                f"thought_outcome = 'pending' AND (thought_claim IS NULL OR thought_claim = ? OR "
                f"thought_claimed_at IS NULL OR thought_claimed_at < ?) RETURNING {_JOB}",
                [worker, now, int(query_id), worker, now - lease_s]).fetchall()
        return _job(row[0]) if row else None

    def claim_next(self, worker: str, lease_s: float) -> ThoughtJob | None:
        """Claim the oldest pending job nobody holds (never claimed, or its lease ran out) for ``worker``."""
        now = time.time()
        with self._store.transaction() as conn:
            found = conn.execute(
                "SELECT id FROM queries WHERE thought_outcome = 'pending' AND (thought_claim IS NULL OR "
                "thought_claimed_at IS NULL OR thought_claimed_at < ?) ORDER BY id LIMIT 1"
                + self._store.dialect.skip_locked, [now - lease_s]).fetchone()
            if found is None:
                return None
            row = conn.execute(f"UPDATE queries SET thought_claim = ?, thought_claimed_at = ? WHERE id = ? "
                               f"RETURNING {_JOB}", [worker, now, int(found[0])]).fetchall()
        return _job(row[0])

    def renew(self, query_ids: list[int], worker: str) -> int:
        """Renew ``worker``'s lease on these pending jobs (it is alive); returns how many it still holds."""
        if not query_ids:
            return 0
        with self._store.transaction() as conn:
            return conn.execute(
                f"UPDATE queries SET thought_claimed_at = ? WHERE thought_claim = ? AND thought_outcome = 'pending' "
                f"AND id IN ({marks(query_ids)})", [time.time(), worker, *map(int, query_ids)]).rowcount

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
