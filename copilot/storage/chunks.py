"""Chunks: the retrievable pieces of papers, each with its embedding; a chunk is visible when its paper is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot.storage.papers import visibility
from copilot.storage.rows import fetch_all, from_blob, marks
from copilot.types import Chunk

if TYPE_CHECKING:
    from copilot.storage.store import Store

_FIELDS = ("paper_id", "seq", "section", "text", "page_start", "page_end", "char_start", "char_end", "n_tokens")
_SELECT = ", ".join(f"c.{name}" for name in ("id", *_FIELDS, "bbox"))


def box_text(box: Sequence[float] | None) -> str | None:
    """A region as stored: "x0,y0,x1,y1"."""
    return None if box is None else ",".join(f"{v:g}" for v in box)


def box_of(text: str | None) -> tuple[float, float, float, float] | None:
    """A stored region read back (None when there is none, or it is not four numbers)."""
    try:
        values = tuple(float(v) for v in (text or "").split(","))
    except ValueError:
        return None
    return values if len(values) == 4 else None  # type: ignore[return-value]


def _chunk(row: dict[str, Any]) -> Chunk:
    blob = row.pop("embedding", None)
    row["bbox"] = box_of(row.get("bbox"))
    return Chunk(**row, vector=None if blob is None else from_blob(blob))


class ChunkRepository:
    """Reads and writes ``chunks``; their vectors go through the store's vector writes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> list[int]:
        """Insert chunks with their embeddings (after their paper, in the same transaction); returns the ids."""
        records = [{**{name: getattr(c, name) for name in _FIELDS}, "bbox": box_text(c.bbox)} for c in chunks]
        return self._store.insert_with_vectors("chunks", records, vectors)

    def delete(self, ids: Sequence[int]) -> int:
        return self._store.delete_with_vectors("chunks", ids)

    def ids_of(self, paper_id: str) -> list[int]:
        return [r[0] for r in self._store.conn.execute("SELECT id FROM chunks WHERE paper_id = ?", [paper_id])]

    def sections_of(self, paper_ids: Sequence[str]) -> dict[int, tuple[str, str | None]]:
        """chunk id -> (paper id, section) for these papers: what choosing among them needs, without the texts."""
        if not paper_ids:
            return {}
        rows = self._store.conn.execute(f"SELECT id, paper_id, section FROM chunks WHERE paper_id IN "
                                        f"({marks(paper_ids)})", list(paper_ids))
        return {int(r[0]): (r[1], r[2]) for r in rows}

    def of_papers(self, paper_ids: Sequence[str], *, vectors: bool = False) -> list[Chunk]:
        """The chunks of these papers in reading order (by paper as given, then by position)."""
        if not paper_ids:
            return []
        embedding = ", c.embedding" if vectors else ""
        rows = fetch_all(self._store.conn,
                         f"SELECT {_SELECT}{embedding} FROM chunks c WHERE c.paper_id IN ({marks(paper_ids)}) "
                         "ORDER BY c.seq", list(paper_ids))
        order = {paper_id: i for i, paper_id in enumerate(paper_ids)}
        return sorted((_chunk(r) for r in rows), key=lambda c: order[c.paper_id])

    def of_paper(self, paper_id: str, *, vectors: bool = False) -> list[Chunk]:
        return self.of_papers([paper_id], vectors=vectors)

    def get_many(self, ids: Sequence[int]) -> list[Chunk]:
        """These chunks with their vectors and their papers' titles (for retrieved items), in id order."""
        if not ids:
            return []
        # Read as tuples and built positionally: retrieval reads 5×K of these for every question.
        rows = self._store.conn.execute(
            f"SELECT {_SELECT}, p.title, c.embedding FROM chunks c LEFT JOIN papers p ON p.id = c.paper_id "
            f"WHERE c.id IN ({marks(ids)}) ORDER BY c.id", list(ids)).fetchall()
        return [Chunk(*r[1:10], id=r[0], bbox=box_of(r[10]), paper_title=r[11], vector=from_blob(r[12])) for r in rows]

    def visible(self, chunk_id: int, user_id: str | None) -> Chunk | None:
        """The chunk with its paper's title, or None when it is gone or its paper is not ``user_id``'s to see."""
        rule, params = visibility(user_id, "p.user_id")
        rows = fetch_all(self._store.conn,
                         f"SELECT {_SELECT}, p.title AS paper_title FROM chunks c "
                         f"LEFT JOIN papers p ON p.id = c.paper_id WHERE c.id = ? AND {rule}", [chunk_id, *params])
        return _chunk(rows[0]) if rows else None

    def vectors(self, ids: Sequence[int]) -> np.ndarray:
        """The embeddings of these chunks (one row each; those that no longer exist are left out)."""
        if not ids:
            return np.zeros((0, 0), dtype=np.float32)
        rows = self._store.conn.execute(f"SELECT embedding FROM chunks WHERE id IN ({marks(ids)})",
                                        list(ids)).fetchall()
        return np.stack([from_blob(r[0]) for r in rows]) if rows else np.zeros((0, 0), dtype=np.float32)
