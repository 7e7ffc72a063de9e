"""Thoughts and their provenance edges (``thought_sources``: which chunks and thoughts each was built from).

A thought is its owner's; a public one (the opt-in pool) may be read by everyone. Changes to what the vector
filters read (confidence, flagged, public, owner) are reported to the store in the transaction that makes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot.storage.rows import fetch_all, fetch_one, from_blob, marks, utc_now
from copilot.types import Thought, ThoughtSource

if TYPE_CHECKING:
    from copilot.storage.store import Store

# What reading a thought returns (everything but its embedding).
_COLUMNS = "id, user_id, text, confidence, support, depth, public, flagged, created_at, updated_at"


def _thought(row: dict[str, Any], sources: list[ThoughtSource] | None = None) -> Thought:
    blob = row.pop("embedding", None)
    return Thought(**(row | {"public": bool(row["public"]), "flagged": bool(row["flagged"])}), sources=sources,
                   vector=None if blob is None else from_blob(blob))


class ThoughtRepository:
    """Reads and writes ``thoughts`` and ``thought_sources``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # ----- reading -----------------------------------------------------------------------------------

    def get(self, thought_id: int, *, sources: bool = False) -> Thought | None:
        row = fetch_one(self._store.conn, f"SELECT {_COLUMNS} FROM thoughts WHERE id = ?", [thought_id])
        if row is None:
            return None
        return _thought(row, self.sources(thought_id) if sources else None)

    def visible(self, thought_id: int, user_id: str | None, *, sources: bool = False) -> Thought | None:
        """The thought if ``user_id`` may read it: their own, or public. No user: any thought."""
        thought = self.get(thought_id, sources=sources)
        if thought is None or (user_id is not None and thought.user_id != user_id and not thought.public):
            return None
        return thought

    def list(self, owner: str | None = None) -> list[Thought]:
        """The thoughts of ``owner`` (every thought when None), oldest first."""
        where, params = ("WHERE user_id = ?", [owner]) if owner is not None else ("", [])
        return [_thought(r) for r in fetch_all(self._store.conn,
                                               f"SELECT {_COLUMNS} FROM thoughts {where} ORDER BY id", params)]

    def get_many(self, ids: Sequence[int]) -> list[Thought]:
        """These thoughts with their vectors (for retrieved items), in id order."""
        if not ids:
            return []
        # Read as tuples and built positionally: retrieval reads 5×K of these for every question.
        rows = self._store.conn.execute(f"SELECT {_COLUMNS}, embedding FROM thoughts WHERE id IN ({marks(ids)}) "
                                        "ORDER BY id", list(ids)).fetchall()
        return [Thought(*r[:6], bool(r[6]), bool(r[7]), *r[8:10], vector=from_blob(r[10])) for r in rows]

    def count_by_depth(self, owner: str | None = None) -> dict[int, int]:
        where, params = ("WHERE user_id = ?", [owner]) if owner is not None else ("", [])
        return {int(r[0]): int(r[1]) for r in self._store.conn.execute(
            f"SELECT depth, COUNT(*) FROM thoughts {where} GROUP BY depth", params)}

    def footprint(self, owner: str) -> tuple[int, int]:
        """(bytes of text and embeddings, number of thoughts) that ``owner``'s memory holds."""
        row = self._store.conn.execute(
            f"SELECT COALESCE(SUM(LENGTH(text) + {self._store.dialect.embedding_bytes}), 0), COUNT(*) FROM thoughts "
            "WHERE user_id = ?", [owner]).fetchone()
        return int(row[0]), int(row[1])

    # ----- provenance --------------------------------------------------------------------------------

    def sources(self, thought_id: int) -> list[ThoughtSource]:
        return self.sources_of([thought_id])[thought_id]

    def sources_of(self, thought_ids: Sequence[int]) -> dict[int, list[ThoughtSource]]:
        """Each thought's provenance edges, by kind then id."""
        out: dict[int, list[ThoughtSource]] = {int(t): [] for t in thought_ids}
        if not thought_ids:
            return out
        for thought_id, kind, source_id in self._store.conn.execute(
                f"SELECT thought_id, source_kind, source_id FROM thought_sources WHERE thought_id IN "
                f"({marks(thought_ids)}) ORDER BY source_kind, source_id", list(thought_ids)):
            out[thought_id].append(ThoughtSource(kind, source_id))
        return out

    def papers_behind(self, thought_id: int) -> list[str]:
        """The papers a thought was built from, through its provenance (thoughts of thoughts included)."""
        return sorted(self.papers_behind_many([thought_id]).get(int(thought_id), set()))

    def papers_behind_many(self, thought_ids: Sequence[int]) -> dict[int, set[str]]:
        """The papers each of ``thought_ids`` was built from, in one query (a thought with none is left out)."""
        ids = sorted({int(i) for i in thought_ids})
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self._store.conn.execute(
            f"""WITH RECURSIVE up(root, kind, id) AS (
                    SELECT thought_id, source_kind, source_id FROM thought_sources WHERE thought_id IN ({marks})
                    UNION SELECT up.root, s.source_kind, s.source_id FROM thought_sources s JOIN up
                          ON up.kind = 'thought' AND s.thought_id = up.id)
                SELECT DISTINCT up.root, c.paper_id FROM up JOIN chunks c ON up.kind = 'chunk' AND c.id = up.id""",
            ids).fetchall()
        found: dict[int, set[str]] = {}
        for root, paper_id in rows:
            found.setdefault(int(root), set()).add(paper_id)
        return found

    def add_sources(self, thought_id: int, sources: Sequence[ThoughtSource]) -> None:
        """Add provenance edges (those already there are kept once; a thought is never its own source)."""
        edges = [(thought_id, s.kind, s.id) for s in sources if not (s.kind == "thought" and s.id == thought_id)]
        with self._store.transaction() as conn:
            conn.executemany("INSERT INTO thought_sources (thought_id, source_kind, source_id) VALUES (?, ?, ?) "
                             "ON CONFLICT DO NOTHING", edges)

    # ----- writing -----------------------------------------------------------------------------------

    def add(self, *, user_id: str, text: str, confidence: float, depth: int, public: bool, vector: np.ndarray,
            sources: Sequence[ThoughtSource]) -> int:
        """Store a new thought (support 1) with its embedding and provenance in one transaction."""
        now = utc_now()
        record = {"user_id": user_id, "text": text, "confidence": confidence, "support": 1, "depth": depth,
                  "public": int(public), "flagged": 0, "created_at": now, "updated_at": now}
        with self._store.transaction():
            (thought_id,) = self._store.insert_with_vectors("thoughts", [record], vector[None])
            self.add_sources(thought_id, sources)
        return thought_id

    def merge(self, thought_id: int, *, support: int, confidence: float, depth: int,
              sources: Sequence[ThoughtSource], text: str | None = None, vector: np.ndarray | None = None) -> None:
        """Update a thought another one merged into: its counts, and its text and embedding when they change."""
        fields = {"support": support, "confidence": confidence, "depth": depth, "updated_at": utc_now()}
        with self._store.transaction() as conn:
            if text is not None and vector is not None:  # the vector write carries the new metadata too
                self._store.update_vector("thoughts", thought_id, fields | {"text": text}, vector)
            else:
                conn.execute(f"UPDATE thoughts SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?",
                             [*fields.values(), thought_id])
                self._store.meta_changed("thoughts", [thought_id])
            self.add_sources(thought_id, sources)

    def set_confidence(self, thought_id: int, confidence: float) -> bool:
        """False when the thought is gone."""
        with self._store.transaction() as conn:
            changed = conn.execute("UPDATE thoughts SET confidence = ?, updated_at = ? WHERE id = ?",
                                   [confidence, utc_now(), thought_id]).rowcount == 1
            if changed:
                self._store.meta_changed("thoughts", [thought_id])
        return changed

    def flag_built_on(self, chunk_ids: Sequence[int]) -> int:
        """Flag the thoughts built on these chunks (their paper is going away); returns how many."""
        if not chunk_ids:
            return 0
        with self._store.transaction() as conn:
            ids = [r[0] for r in conn.execute(
                f"SELECT DISTINCT thought_id FROM thought_sources WHERE source_kind = 'chunk' AND source_id IN "
                f"({marks(chunk_ids)})", list(chunk_ids))]
            if not ids:
                return 0
            flagged = conn.execute(f"UPDATE thoughts SET flagged = 1 WHERE id IN ({marks(ids)})", ids).rowcount
            self._store.meta_changed("thoughts", ids)
        return flagged

    def flag(self, thought_ids: Sequence[int]) -> int:
        """Flag these thoughts (they fail a check: never retrieved again, kept for the record); returns how many."""
        if not thought_ids:
            return 0
        ids = [int(t) for t in thought_ids]
        with self._store.transaction() as conn:
            flagged = conn.execute(f"UPDATE thoughts SET flagged = 1 WHERE id IN ({marks(ids)})", ids).rowcount
            self._store.meta_changed("thoughts", ids)
        return flagged

    def delete(self, thought_id: int) -> bool:
        """Delete a thought with its vector and every provenance edge from or to it."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM thought_sources WHERE thought_id = ? OR (source_kind = 'thought' AND "
                         "source_id = ?)", [thought_id, thought_id])
            return self._store.delete_with_vectors("thoughts", [thought_id]) == 1
