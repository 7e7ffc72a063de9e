"""Papers: the shared arXiv papers and each user's uploads, with the one rule of who may see which."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot.storage.rows import dumps_or_none, fetch_all, fetch_one, loads
from copilot.types import Paper, PaperSummary

if TYPE_CHECKING:
    from copilot.storage.store import Store

# Columns holding JSON lists, and the table column each Paper field is kept in.
_LIST_FIELDS = ("authors", "categories", "sections", "warnings", "references")
_COLUMN = {"references": "references_json"}
_STORED = [f.name for f in fields(Paper) if f.name != "n_chunks"]
# A paper read whole, with its chunk count in the same statement.
_WITH_COUNT = "SELECT p.*, (SELECT COUNT(*) FROM chunks c WHERE c.paper_id = p.id) AS n_chunks FROM papers p"


def visibility(user_id: str | None, owner_column: str = "user_id") -> tuple[str, list[Any]]:
    """Who may see a paper, as a SQL condition over its owner column: a shared arXiv paper (no owner) is
    everyone's, an upload only its owner's. With no user (the command line, the instance's owner) every paper."""
    if user_id is None:
        return "TRUE", []
    return f"({owner_column} IS NULL OR {owner_column} = ?)", [user_id]


def _paper(row: dict[str, Any], n_chunks: int) -> Paper:
    values: dict[str, Any] = {}
    for name in _STORED:
        value = row.get(_COLUMN.get(name, name))
        if name in _LIST_FIELDS:
            value = loads(value, [])
        elif name == "meta":
            value = loads(value, {})
        values[name] = value
    return Paper(**values, n_chunks=n_chunks)


def _record(paper: Paper) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name in _STORED:
        value = getattr(paper, name)
        if name in _LIST_FIELDS:
            value = json.dumps(value)
        elif name == "meta":
            value = dumps_or_none(value)
        record[_COLUMN.get(name, name)] = value
    return record


class PaperRepository:
    """Reads and writes ``papers``; every read on behalf of a user applies :func:`visibility`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def exists(self, paper_id: str) -> bool:
        return self._store.conn.execute("SELECT 1 FROM papers WHERE id = ?", [paper_id]).fetchone() is not None

    def get(self, paper_id: str, user_id: str | None = None) -> Paper | None:
        """The paper, or None when there is none or ``user_id`` may not see it."""
        rule, params = visibility(user_id, "p.user_id")
        row = fetch_one(self._store.conn, f"{_WITH_COUNT} WHERE p.id = ? AND {rule}", [paper_id, *params])
        return None if row is None else _paper(row, row["n_chunks"])

    def by_hash(self, file_hash: str, owner: str | None) -> Paper | None:
        """A paper made from the PDF with this SHA-256 among ``owner``'s uploads and the shared arXiv papers (only
        the shared ones when ``owner`` is None): what an add of that file by ``owner`` would repeat. Another user's
        upload of the same file is never found, so an add says nothing about what others hold."""
        rule, params = visibility(owner, "p.user_id") if owner else ("p.user_id IS NULL", [])
        row = fetch_one(self._store.conn,
                        f"{_WITH_COUNT} WHERE p.file_hash = ? AND {rule} ORDER BY p.added_at LIMIT 1",
                        [file_hash, *params])
        return None if row is None else _paper(row, row["n_chunks"])

    def file_in_use(self, file_hash: str) -> bool:
        """Does any paper, whoever owns it, use the stored PDF with this SHA-256 (one file serves every owner)?"""
        return self._store.conn.execute("SELECT 1 FROM papers WHERE file_hash = ? LIMIT 1",
                                        [file_hash]).fetchone() is not None

    def stored_file_names(self) -> set[str]:
        """The file names of every stored PDF a paper row points at (whoever owns it)."""
        return {Path(r[0]).name for r in self._store.conn.execute(
            "SELECT pdf_path FROM papers WHERE pdf_path IS NOT NULL")}

    def visible_ids(self, user_id: str | None = None) -> list[str]:
        """The ids of every paper ``user_id`` may see, in the order they were added (no chunk counts: this is on
        the path of every question)."""
        rule, params = visibility(user_id)
        return [r[0] for r in self._store.conn.execute(
            f"SELECT id FROM papers WHERE {rule} ORDER BY added_at, id", params)]

    def visible(self, user_id: str | None = None) -> list[PaperSummary]:
        """Every paper ``user_id`` may see, in the order they were added."""
        rule, params = visibility(user_id, "p.user_id")
        rows = fetch_all(self._store.conn,
                         f"""SELECT p.id, p.title, p.source, p.arxiv_id, p.version, p.authors, p.published, p.n_pages,
                                    p.user_id, p.added_at, COUNT(c.id) AS n_chunks
                             FROM papers p LEFT JOIN chunks c ON c.paper_id = p.id
                             WHERE {rule} GROUP BY p.id ORDER BY p.added_at, p.id""", params)
        return [PaperSummary(**(row | {"authors": loads(row["authors"], [])})) for row in rows]

    def upload_files(self, user_id: str) -> list[str]:
        """The stored PDF of each of ``user_id``'s own uploads (what their upload limits count)."""
        return [r[0] or "" for r in self._store.conn.execute(
            "SELECT pdf_path FROM papers WHERE user_id = ? ORDER BY added_at, id", [user_id])]

    def add(self, paper: Paper) -> None:
        self.add_many([paper])

    def add_many(self, papers: Sequence[Paper]) -> None:
        """Insert papers (their chunks go in with :meth:`ChunkRepository.add`, in the same transaction)."""
        with self._store.transaction() as conn:
            for paper in papers:
                record = _record(paper)
                conn.execute(f"INSERT INTO papers ({', '.join(record)}) VALUES ({', '.join('?' * len(record))})",
                             list(record.values()))

    def delete(self, paper_id: str) -> bool:
        """Delete the paper row; its chunks must be gone first (see :meth:`ChunkRepository.delete`)."""
        with self._store.transaction() as conn:
            return conn.execute("DELETE FROM papers WHERE id = ?", [paper_id]).rowcount == 1
