"""Zotero connections (one per user, the API key sealed) and the items each sync took, by key and version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from copilot.storage.rows import fetch_all, fetch_one, utc_now

if TYPE_CHECKING:
    from copilot.storage.store import Store

_CONNECTION = "user_id, library_type, library_id, sealed_key, collection, local, library_version, created_at, synced_at"


class ZoteroRepository:
    """Reads and writes ``zotero_connections`` and ``zotero_items``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def connection(self, user_id: str) -> dict[str, Any] | None:
        return fetch_one(self._store.conn, f"SELECT {_CONNECTION} FROM zotero_connections WHERE user_id = ?",
                         [user_id])

    def connect(self, user_id: str, *, library_type: str, library_id: str, sealed_key: str, collection: str,
                local: bool) -> None:
        """Keep the user's connection, replacing any earlier one (a new library starts from version 0; the items
        it synced are kept, so nothing is taken twice)."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM zotero_connections WHERE user_id = ?", [user_id])
            conn.execute("INSERT INTO zotero_connections (user_id, library_type, library_id, sealed_key, collection, "
                         "local, library_version, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
                         [user_id, library_type, library_id, sealed_key, collection, int(local), utc_now()])

    def replace_key(self, user_id: str, sealed_key: str) -> None:
        """A new key for the same library (where its sync was stays)."""
        with self._store.transaction() as conn:
            conn.execute("UPDATE zotero_connections SET sealed_key = ? WHERE user_id = ?", [sealed_key, user_id])

    def disconnect(self, user_id: str) -> bool:
        """Delete the connection and its key, and the record of what it synced (the papers stay)."""
        with self._store.transaction() as conn:
            gone = conn.execute("DELETE FROM zotero_connections WHERE user_id = ?", [user_id]).rowcount
            conn.execute("DELETE FROM zotero_items WHERE user_id = ?", [user_id])
        return gone == 1

    def records_only(self, user_id: str) -> set[str]:
        """The items a sync took as records only (no arXiv id, no stored PDF then)."""
        return {r["item_key"] for r in fetch_all(
            self._store.conn, "SELECT item_key FROM zotero_items WHERE user_id = ? AND status = 'metadata only'",
            [user_id])}

    def versions(self, user_id: str) -> dict[str, int]:
        """Each item synced before, and the version it had then."""
        return {r["item_key"]: int(r["version"]) for r in fetch_all(
            self._store.conn, "SELECT item_key, version FROM zotero_items WHERE user_id = ?", [user_id])}

    def record_item(self, user_id: str, item_key: str, version: int, status: str, paper_id: str | None,
                    title: str) -> None:
        """Note one item as synced at ``version`` (done at once, so a sync cut after it does not take it again)."""
        with self._store.transaction() as conn:
            conn.execute("INSERT INTO zotero_items (user_id, item_key, version, status, paper_id, title, synced_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, item_key) DO UPDATE SET "
                         "version = excluded.version, status = excluded.status, paper_id = excluded.paper_id, "
                         "title = excluded.title, synced_at = excluded.synced_at",
                         [user_id, item_key, version, status, paper_id, title[:300], utc_now()])

    def finished(self, user_id: str, library_version: int) -> None:
        """A whole sync is done: the library version it saw is the next sync's starting point."""
        with self._store.transaction() as conn:
            conn.execute("UPDATE zotero_connections SET library_version = ?, synced_at = ? WHERE user_id = ?",
                         [library_version, utc_now(), user_id])
