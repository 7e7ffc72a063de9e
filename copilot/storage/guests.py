"""What guests keep, all of them together, and the forgetting of guests who stopped coming.

A guest costs a visitor nothing, so a public instance bounds what all guests store (:meth:`footprint`) and
deletes the records of a guest idle for ``COPILOT_GUEST_DAYS`` (:meth:`idle`, :meth:`forget`): their cookie has
expired by then, so nobody can open that space again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from copilot.storage.store import Store

# Every record a user owns that carries a time, and that time: a guest's last activity is the latest of them.
_ACTIVITY = (("papers", "added_at"), ("queries", "created_at"), ("memories", "created_at"),
             ("thoughts", "updated_at"), ("conversations", "updated_at"), ("profiles", "updated_at"),
             ("follows", "created_at"), ("feedback", "created_at"), ("usage_events", "at"),
             ("access_tokens", "COALESCE(last_used_at, created_at)"), ("zotero_connections", "created_at"),
             ("zotero_connections", "synced_at"), ("zotero_items", "synced_at"))
# Records deleted by user id alone (papers, thoughts and memories go with their vectors and files first).
_PLAIN = ("feedback", "conversation_turns", "conversations", "queries", "profiles", "follows", "refreshes",
          "usage_events", "access_tokens", "zotero_items", "zotero_connections")


class GuestRepository:
    """Reads and forgets the records of the users whose id starts with a prefix (the guests)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def footprint(self, prefix: str) -> tuple[list[str], int]:
        """What those users keep: their uploaded PDFs' stored files, and their rows (passages of their uploads,
        memories, thoughts)."""
        like = prefix + "%"
        conn = self._store.conn
        files = [r[0] for r in conn.execute("SELECT pdf_path FROM papers WHERE user_id LIKE ? AND pdf_path != ''",
                                            [like]) if r[0]]
        rows = sum(int(conn.execute(sql, [like]).fetchone()[0]) for sql in (
            "SELECT COUNT(*) FROM chunks c JOIN papers p ON c.paper_id = p.id WHERE p.user_id LIKE ?",
            "SELECT COUNT(*) FROM memories WHERE user_id LIKE ?",
            "SELECT COUNT(*) FROM thoughts WHERE user_id LIKE ?"))
        return files, rows

    def idle(self, prefix: str, before: str, limit: int = 1000) -> list[str]:
        """Those users whose latest record is older than ``before`` (an ISO time), the longest idle first."""
        union = " UNION ALL ".join(f"SELECT user_id, {column} AS at FROM {table} WHERE user_id LIKE ?"
                                   for table, column in _ACTIVITY)
        rows = self._store.conn.execute(
            f"SELECT user_id FROM ({union}) AS activity GROUP BY user_id HAVING MAX(at) < ? "
            "ORDER BY MAX(at), user_id LIMIT ?", [prefix + "%"] * len(_ACTIVITY) + [before, limit]).fetchall()
        return [r[0] for r in rows]

    def papers_of(self, user_id: str) -> list[str]:
        """The ids of the papers ``user_id`` uploaded (removed through the library, which also deletes files)."""
        return [r[0] for r in self._store.conn.execute("SELECT id FROM papers WHERE user_id = ? ORDER BY id",
                                                       [user_id])]

    def forget(self, user_id: str) -> int:
        """Delete every record of ``user_id`` but their papers (thoughts and memories with their vectors); returns
        the rows deleted."""
        conn = self._store.conn
        thoughts = [r[0] for r in conn.execute("SELECT id FROM thoughts WHERE user_id = ?", [user_id])]
        memories = [r[0] for r in conn.execute("SELECT id FROM memories WHERE user_id = ?", [user_id])]
        with self._store.transaction() as tx:
            deleted = 0
            if thoughts:  # every provenance edge from or to them, other users' thoughts built on them included
                marks = ", ".join("?" * len(thoughts))
                tx.execute(f"DELETE FROM thought_sources WHERE thought_id IN ({marks}) OR (source_kind = 'thought' "
                           f"AND source_id IN ({marks}))", thoughts + thoughts)
            deleted += self._store.delete_with_vectors("thoughts", thoughts)
            deleted += self._store.delete_with_vectors("memories", memories)
            for table in _PLAIN:
                deleted += tx.execute(f"DELETE FROM {table} WHERE user_id = ?", [user_id]).rowcount
        return deleted
