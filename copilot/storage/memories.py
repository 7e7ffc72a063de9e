"""Personal memories: what a user said about themselves. Only their owner ever reads or deletes them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from typing import TYPE_CHECKING

from copilot.storage.rows import fetch_all, marks, utc_now
from copilot.types import Memory

if TYPE_CHECKING:
    from copilot.storage.store import Store


class MemoryRepository:
    """Reads and writes ``memories``; their vectors go through the store's vector writes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, user_id: str, text: str, vector: np.ndarray) -> int:
        (memory_id,) = self._store.insert_with_vectors(
            "memories", [{"user_id": user_id, "text": text, "created_at": utc_now()}], vector)
        return memory_id

    def count(self, user_id: str) -> int:
        return int(self._store.conn.execute("SELECT COUNT(*) FROM memories WHERE user_id = ?", [user_id]).fetchone()[0])

    def list(self, user_id: str) -> list[Memory]:
        """The user's memories, newest first."""
        return [Memory(**r) for r in fetch_all(
            self._store.conn, "SELECT id, user_id, text, created_at FROM memories WHERE user_id = ? ORDER BY id DESC",
            [user_id])]

    def get_many(self, ids: Sequence[int], user_id: str) -> list[Memory]:
        """Those of these memories that are ``user_id``'s."""
        if not ids:
            return []
        return [Memory(**r) for r in fetch_all(
            self._store.conn, f"SELECT id, user_id, text, created_at FROM memories WHERE id IN ({marks(ids)}) "
            "AND user_id = ? ORDER BY id", [*ids, user_id])]

    def delete(self, memory_id: int, user_id: str) -> bool:
        """Delete one of the user's memories with its vector; another user's memory is never touched (False)."""
        with self._store.transaction() as conn:
            row = conn.execute("SELECT user_id FROM memories WHERE id = ?", [int(memory_id)]).fetchone()
            if row is None or row[0] != user_id:
                return False
            return self._store.delete_with_vectors("memories", [int(memory_id)]) == 1
