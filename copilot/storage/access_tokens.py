"""Personal access tokens: the hash of each token's secret, its user and name, when it was last used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot.storage.rows import fetch_all, fetch_one, inserted_id, utc_now
from copilot.types import AccessToken

if TYPE_CHECKING:
    from copilot.storage.store import Store

_COLUMNS = "id, user_id, name, created_at, last_used_at"


class AccessTokenRepository:
    """Reads and writes ``access_tokens``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, user_id: str, name: str, token_hash: str, *, limit: int) -> AccessToken | None:
        """Keep a new token of ``user_id`` by the hash of its secret; None when the user already holds ``limit``
        (counted and written in one transaction, so two requests racing cannot pass it)."""
        with self._store.transaction() as conn:
            self._store.serialize(f"tokens {user_id}")
            held = int(conn.execute("SELECT COUNT(*) FROM access_tokens WHERE user_id = ?", [user_id]).fetchone()[0])
            if held >= limit:
                return None
            token_id = inserted_id(conn, "INSERT INTO access_tokens (user_id, name, token_hash, created_at) "
                                   "VALUES (?, ?, ?, ?) RETURNING id", [user_id, name, token_hash, utc_now()])
        found = fetch_one(self._store.conn, f"SELECT {_COLUMNS} FROM access_tokens WHERE id = ?", [token_id])
        assert found is not None
        return AccessToken(**found)

    def of(self, user_id: str) -> list[AccessToken]:
        """The tokens ``user_id`` holds, the newest first."""
        return [AccessToken(**row) for row in fetch_all(
            self._store.conn, f"SELECT {_COLUMNS} FROM access_tokens WHERE user_id = ? ORDER BY id DESC", [user_id])]

    def revoke(self, user_id: str, token_id: int) -> bool:
        """Delete ``user_id``'s token ``token_id``; False when they hold none by that id."""
        with self._store.transaction() as conn:
            return conn.execute("DELETE FROM access_tokens WHERE id = ? AND user_id = ?",
                                [token_id, user_id]).rowcount == 1

    def user_of(self, token_hash: str) -> tuple[str, str] | None:
        """The user whose token has this hash, and when it was made (None: no such token, or revoked), noting that
        it was used now."""
        found = fetch_one(self._store.conn, "SELECT id, user_id, created_at FROM access_tokens WHERE token_hash = ?",
                          [token_hash])
        if found is None:
            return None
        with self._store.transaction() as conn:
            conn.execute("UPDATE access_tokens SET last_used_at = ? WHERE id = ?", [utc_now(), found["id"]])
        return str(found["user_id"]), str(found["created_at"])
