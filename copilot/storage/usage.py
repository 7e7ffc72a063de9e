"""What each user spent, for the limits of a shared instance: questions asked, papers added from arXiv.

Every counted action is one row, so a limit over a time window is a count over recent rows, and the check and
the record are one write transaction (on PostgreSQL, under an advisory lock per user): two requests of one user
racing past a limit cannot both get in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from copilot.storage.rows import utc_now

if TYPE_CHECKING:
    from copilot.storage.store import Store

KEEP = timedelta(days=2)  # rows older than the longest window are pruned as new ones arrive


def _since(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).isoformat()


class UsageRepository:
    """Reads and writes ``usage_events``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def count_since(self, user_id: str, action: str, seconds: float) -> int:
        """How many times ``user_id`` did ``action`` in the last ``seconds``."""
        return int(self._store.conn.execute(
            "SELECT COUNT(*) FROM usage_events WHERE user_id = ? AND action = ? AND at > ?",
            [user_id, action, _since(seconds)]).fetchone()[0])

    def refund(self, user_id: str, action: str, amount: int) -> None:
        """Take back the ``amount`` latest uses of ``action`` by ``user_id``: counted before the work they paid for,
        which was never done."""
        if amount <= 0:
            return
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM usage_events WHERE id IN (SELECT id FROM usage_events WHERE user_id = ? AND "
                         "action = ? ORDER BY id DESC LIMIT ?)", [user_id, action, amount])

    def record(self, user_id: str, action: str, amount: int = 1) -> None:
        """Count ``amount`` uses of ``action`` that already happened (a refresh's additions, known afterwards)."""
        if amount <= 0:
            return
        with self._store.transaction() as conn:
            conn.executemany("INSERT INTO usage_events (user_id, action, at) VALUES (?, ?, ?)",
                             [(user_id, action, utc_now())] * amount)

    def admit(self, user_id: str, action: str, *, limit: int, window_s: float, amount: int = 1) -> int | None:
        """Record ``amount`` uses of ``action`` if that keeps the user within ``limit`` per ``window_s``.

        Returns None when admitted, else how many uses the window already holds (nothing is recorded).
        """
        with self._store.transaction() as conn:
            self._store.serialize(f"usage {user_id}")
            used = int(conn.execute(
                "SELECT COUNT(*) FROM usage_events WHERE user_id = ? AND action = ? AND at > ?",
                [user_id, action, _since(window_s)]).fetchone()[0])
            if used + amount > limit:
                return used
            now = utc_now()
            conn.executemany("INSERT INTO usage_events (user_id, action, at) VALUES (?, ?, ?)",
                             [(user_id, action, now)] * amount)
            conn.execute("DELETE FROM usage_events WHERE at < ?", [_since(KEEP.total_seconds())])
            return None
