"""Research personas and the language answers are written in, one row per user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot.storage.rows import fetch_one, utc_now
from copilot.types import Profile

if TYPE_CHECKING:
    from copilot.storage.store import Store


class ProfileRepository:
    """Reads and writes ``profiles``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, user_id: str) -> Profile | None:
        row = fetch_one(self._store.conn, "SELECT user_id, persona, source, updated_at, answer_language FROM profiles "
                        "WHERE user_id = ?", [user_id])
        return None if row is None else Profile(**row)

    def save(self, user_id: str, persona: str, source: str) -> Profile:
        """Keep ``persona`` as the user's profile, replacing any earlier one."""
        with self._store.transaction() as conn:
            conn.execute("INSERT INTO profiles (user_id, persona, source, updated_at) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT(user_id) DO UPDATE SET persona = excluded.persona, source = excluded.source, "
                         "updated_at = excluded.updated_at", [user_id, persona, source, utc_now()])
        profile = self.get(user_id)
        assert profile is not None
        return profile

    def save_language(self, user_id: str, language: str | None) -> Profile:
        """Keep the language the user's answers are written in (None: the question's); the persona is kept, and
        a user without a profile gets one with an empty persona."""
        with self._store.transaction() as conn:
            conn.execute("INSERT INTO profiles (user_id, persona, source, updated_at, answer_language) "
                         "VALUES (?, '', NULL, ?, ?) ON CONFLICT(user_id) DO UPDATE SET "
                         "answer_language = excluded.answer_language", [user_id, utc_now(), language])
        profile = self.get(user_id)
        assert profile is not None
        return profile
