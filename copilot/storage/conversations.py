"""Kept conversations: each user's chats as turns in order; a user reads, renames and deletes only their own.

A conversation is created with its first turn, in one transaction, so none is ever empty. Every statement names
the user: another user's conversation id matches no row, exactly as a missing one. A turn keeps the question and
the answer as given beside the answered query's id, whose row holds the sources and the thought's outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from copilot.storage.rows import fetch_all, fetch_one, inserted_id, utc_now
from copilot.types import Conversation, ConversationTurn

if TYPE_CHECKING:
    from copilot.storage.store import Store

_LIST = ("SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, COUNT(t.id) AS n_turns, "
         "COALESCE(MAX(t.id), 0) AS last_turn FROM conversations c LEFT JOIN conversation_turns t ON "
         "t.conversation_id = c.id WHERE c.user_id = ? {where} GROUP BY c.id, c.user_id, c.title, c.created_at, "
         "c.updated_at ORDER BY last_turn DESC, c.id DESC")
_TURN = "id, conversation_id, question, answer, query_id, created_at"


def _conversation(row: dict) -> Conversation:
    row.pop("last_turn", None)
    return Conversation(**(row | {"id": int(row["id"]), "n_turns": int(row["n_turns"] or 0)}))


class ConversationRepository:
    """Reads and writes ``conversations`` and ``conversation_turns``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def start(self, user_id: str, title: str, question: str, answer: str, query_id: int | None) -> int:
        """A new conversation of ``user_id`` titled ``title``, holding its first turn; returns its id."""
        now = utc_now()
        with self._store.transaction() as conn:
            conversation_id = inserted_id(
                conn, "INSERT INTO conversations (user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?) "
                "RETURNING id", [user_id, title, now, now])
            self._insert_turn(conn, conversation_id, user_id, question, answer, query_id, now)
        return conversation_id

    def add_turn(self, conversation_id: int, user_id: str, question: str, answer: str,
                 query_id: int | None) -> int | None:
        """Append a turn to the user's conversation; None, adding nothing, when it is not theirs (or gone)."""
        now = utc_now()
        with self._store.transaction() as conn:
            if conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ? AND user_id = ?",
                            [now, int(conversation_id), user_id]).rowcount != 1:
                return None
            return self._insert_turn(conn, int(conversation_id), user_id, question, answer, query_id, now)

    @staticmethod
    def _insert_turn(conn, conversation_id: int, user_id: str, question: str, answer: str,  # noqa: ANN001
                     query_id: int | None, now: str) -> int:
        return inserted_id(conn, "INSERT INTO conversation_turns (conversation_id, user_id, question, answer, "
                                 "query_id, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                           [conversation_id, user_id, question, answer, query_id, now])

    def list(self, user_id: str) -> list[Conversation]:
        """The user's conversations, the one that last grew first."""
        return [_conversation(r) for r in fetch_all(self._store.conn, _LIST.format(where=""), [user_id])]

    def get(self, conversation_id: int, user_id: str) -> Conversation | None:
        """The user's conversation, or None when there is none or it is someone else's."""
        row = fetch_one(self._store.conn, _LIST.format(where="AND c.id = ?"), [user_id, int(conversation_id)])
        return None if row is None else _conversation(row)

    def turns(self, conversation_id: int, user_id: str, *, last: int | None = None) -> list[ConversationTurn]:
        """The turns of the user's conversation in order (only the ``last`` ones when given); empty when it is
        not theirs."""
        rows = fetch_all(self._store.conn, f"SELECT {_TURN} FROM conversation_turns WHERE conversation_id = ? AND "
                         "user_id = ? ORDER BY id DESC" + (f" LIMIT {int(last)}" if last is not None else ""),
                         [int(conversation_id), user_id])
        return [ConversationTurn(**r) for r in reversed(rows)]

    def rename(self, conversation_id: int, user_id: str, title: str) -> bool:
        """Retitle the user's conversation; False when it is not theirs."""
        with self._store.transaction() as conn:
            return conn.execute("UPDATE conversations SET title = ? WHERE id = ? AND user_id = ?",
                                [title, int(conversation_id), user_id]).rowcount == 1

    def delete(self, conversation_id: int, user_id: str) -> bool:
        """Delete the user's conversation and its turns (the answered queries stay: thoughts and feedback point at
        them); False when it is not theirs."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM conversation_turns WHERE conversation_id = ? AND user_id = ?",
                         [int(conversation_id), user_id])
            return conn.execute("DELETE FROM conversations WHERE id = ? AND user_id = ?",
                                [int(conversation_id), user_id]).rowcount == 1
