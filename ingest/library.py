"""The paper library: add (idempotent), list, show and remove papers with their chunks and vectors.

Adding is all or nothing: the PDF is parsed, chunked and embedded first, then the paper row and every chunk
with its vector go into SQLite in one transaction. A failure at any step leaves the library exactly as it
was (a PDF copied in for the attempt is removed again).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.storage import Store, utc_now
from ingest.chunking import ChunkingOptions, chunk_paper
from ingest.download import download_pdf, store_upload
from ingest.errors import ArxivError, IngestError, InvalidArxivId, PDFError
from ingest.models import PaperMetadata, ParsedPaper, Progress, no_progress

LOCAL_USER = "local"


@dataclass
class AddResult:
    """What one add did: ``added`` is False when the paper was already in the library."""

    paper_id: str
    title: str
    added: bool
    n_chunks: int = 0
    n_pages: int = 0
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class RemoveResult:
    paper_id: str
    chunks_removed: int
    thoughts_flagged: int


def upload_paper_id(sha256: str) -> str:
    return f"pdf-{sha256[:12]}"


class Library:
    """Papers of one data directory."""

    def __init__(
        self,
        store: Store,
        pdf_dir: Path,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        arxiv=None,  # noqa: ANN001 - an ingest.arxiv_client.ArxivClient, created on first use
        chunking: ChunkingOptions | None = None,
    ) -> None:
        self.store = store
        self.pdf_dir = pdf_dir
        self._embedder = embedder
        self._settings = settings
        self._arxiv = arxiv
        self.chunking = chunking or ChunkingOptions()

    @classmethod
    def open(cls, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
             arxiv=None) -> Library:  # noqa: ANN001
        return cls(store or Store.open(settings), settings.data_dir / "pdfs", embedder=embedder, settings=settings,
                   arxiv=arxiv)

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: listing or removing papers needs no model."""
        if self._embedder is None:
            from copilot.embeddings import get_embedder

            self._embedder = get_embedder(self._settings)
        return self._embedder

    @property
    def arxiv(self):  # noqa: ANN201
        if self._arxiv is None:
            from ingest.arxiv_client import ArxivClient

            self._arxiv = ArxivClient()
        return self._arxiv

    # ----- look-ups ----------------------------------------------------------------------------------

    def resolve(self, paper_ref: str) -> str | None:
        """The stored id for ``paper_ref``: an exact id, or any form of an arXiv id (URL, prefix, version)."""
        table = self.store.db["papers"]
        if table.count_where("id = ?", [paper_ref]):
            return paper_ref
        from ingest.arxiv_client import parse_arxiv_id

        try:
            arxiv_id, _ = parse_arxiv_id(paper_ref)
        except InvalidArxivId:
            return None
        return arxiv_id if table.count_where("id = ?", [arxiv_id]) else None

    def _visible(self, row: dict[str, Any], user_id: str | None) -> bool:
        return user_id is None or row.get("user_id") in (None, user_id)

    def list(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """Every paper ``user_id`` may see (arXiv papers are public; uploads belong to their user)."""
        rows = self.store.db.query(
            """SELECT p.id, p.title, p.source, p.arxiv_id, p.version, p.authors, p.published, p.n_pages,
                      p.user_id, p.added_at, COUNT(c.id) AS n_chunks
               FROM papers p LEFT JOIN chunks c ON c.paper_id = p.id
               GROUP BY p.id ORDER BY p.added_at, p.id"""
        )
        papers = []
        for row in rows:
            if self._visible(row, user_id):
                row["authors"] = json.loads(row["authors"] or "[]")
                papers.append(row)
        return papers

    def show(self, paper_ref: str, user_id: str | None = None) -> dict[str, Any]:
        """One paper with its metadata, sections (title, level, pages) and reference count."""
        paper_id = self.resolve(paper_ref)
        if paper_id is None:
            raise IngestError(f"No paper '{paper_ref}' in the library; `python -m ingest list` shows what is there.")
        row = dict(self.store.db["papers"].get(paper_id))
        if not self._visible(row, user_id):
            raise IngestError(f"No paper '{paper_ref}' in the library.")
        for key in ("authors", "categories", "sections", "references_json", "warnings", "meta"):
            row[key] = json.loads(row[key]) if row.get(key) else ([] if key != "meta" else {})
        row["references"] = row.pop("references_json")
        row["n_chunks"] = self.store.db["chunks"].count_where("paper_id = ?", [paper_id])
        return row

    def chunks(self, paper_id: str) -> list[dict[str, Any]]:
        return list(self.store.db.query(
            "SELECT id, seq, section, text, page_start, page_end, char_start, char_end, n_tokens "
            "FROM chunks WHERE paper_id = ? ORDER BY seq", [paper_id]))

    def _existing(self, paper_id: str | None = None, file_hash: str | None = None) -> dict | None:
        if paper_id and self.store.db["papers"].count_where("id = ?", [paper_id]):
            return dict(self.store.db["papers"].get(paper_id))
        if file_hash:
            rows = list(self.store.db["papers"].rows_where("file_hash = ?", [file_hash], limit=1))
            if rows:
                return rows[0]
        return None

    # ----- adding ------------------------------------------------------------------------------------

    def add_pdf(self, path: Path, *, user_id: str = LOCAL_USER, metadata: PaperMetadata | None = None,
                progress: Progress = no_progress) -> AddResult:
        """Add a local PDF (an upload, or a downloaded arXiv PDF when ``metadata`` is given)."""
        progress(0.0, f"Reading {Path(path).name}")
        stored, sha = store_upload(Path(path), self.pdf_dir)
        try:
            paper_id = metadata.arxiv_id if metadata else upload_paper_id(sha)
            found = self._existing(paper_id, sha)
            if found:
                self._discard_if_unreferenced(stored, sha)
                return self._already(found, progress)
            return self._add_parsed(stored, sha, paper_id, metadata, user_id, progress)
        except BaseException:
            self._discard_if_unreferenced(stored, sha)
            raise

    def _discard_if_unreferenced(self, stored: Path, sha: str) -> None:
        """Delete a stored PDF that no paper uses (one copied in for an add that stored nothing)."""
        if not self._existing(file_hash=sha):
            stored.unlink(missing_ok=True)

    @staticmethod
    def _already(found: dict[str, Any], progress: Progress) -> AddResult:
        """The result of adding a paper the library already holds."""
        progress(1.0, "Already in the library")
        return AddResult(found["id"], found["title"] or "", added=False, n_pages=found.get("n_pages") or 0)

    def _add_parsed(self, stored: Path, sha: str, paper_id: str, metadata: PaperMetadata | None, user_id: str,
                    progress: Progress) -> AddResult:
        from ingest.pdf import parse_pdf

        seconds: dict[str, float] = {}
        start = time.perf_counter()
        progress(0.1, "Parsing the PDF")
        parsed = parse_pdf(stored)
        seconds["parse"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.3, "Splitting into chunks")
        chunks = chunk_paper(paper_id, parsed, self.embedder.tokenizer, self.chunking)
        if not any(c.section != "Abstract" for c in chunks):
            raise PDFError(f"{stored.name}: no body text could be extracted, so there is nothing to search.")
        seconds["chunk"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.5, f"Embedding {len(chunks)} chunks")
        vectors = self.embedder.encode_documents([f"{c.section}. {c.text}" for c in chunks])
        seconds["embed"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.9, "Saving")
        record = self._paper_record(paper_id, sha, stored, parsed, metadata, user_id)
        with self.store.transaction() as conn:
            columns = ", ".join(record)
            conn.execute(f"INSERT INTO papers ({columns}) VALUES ({', '.join('?' * len(record))})",
                         list(record.values()))
            self.store.insert_with_vectors("chunks", [asdict(c) for c in chunks], vectors)
        seconds["store"] = time.perf_counter() - start
        progress(1.0, f"Added {record['title'] or paper_id}")
        return AddResult(paper_id, record["title"], added=True, n_chunks=len(chunks), n_pages=parsed.n_pages,
                         warnings=list(parsed.warnings), seconds={k: round(v, 3) for k, v in seconds.items()})

    @staticmethod
    def _paper_record(paper_id: str, sha: str, stored: Path, parsed: ParsedPaper, metadata: PaperMetadata | None,
                      user_id: str) -> dict[str, Any]:
        sections = [{"title": s.title, "level": s.level, "page_start": s.page_start, "page_end": s.page_end,
                     "char_start": s.char_start, "char_end": s.char_end} for s in parsed.sections]
        record: dict[str, Any] = {
            "id": paper_id,
            "user_id": None if metadata else user_id,
            "source": "arxiv" if metadata else "upload",
            "title": (metadata.title if metadata else parsed.title) or stored.stem,
            "abstract": metadata.abstract if metadata and metadata.abstract else parsed.abstract,
            "file_hash": sha,
            "pdf_path": str(stored),
            "n_pages": parsed.n_pages,
            "sections": json.dumps(sections),
            "references_json": json.dumps(parsed.references),
            "warnings": json.dumps(parsed.warnings),
            "added_at": utc_now(),
            "authors": json.dumps(metadata.authors if metadata else []),
            "categories": json.dumps(metadata.categories if metadata else []),
        }
        if metadata:
            record |= {"arxiv_id": metadata.arxiv_id, "version": metadata.version, "published": metadata.published,
                       "updated": metadata.updated, "pdf_url": metadata.pdf_url, "doi": metadata.doi,
                       "journal_ref": metadata.journal_ref,
                       "meta": json.dumps({"comment": metadata.comment,
                                           "primary_category": metadata.primary_category})}
        return record

    def add_arxiv(self, ref: str, *, user_id: str = LOCAL_USER, progress: Progress = no_progress) -> AddResult:
        """Add an arXiv paper by id or URL: metadata, PDF download, parse, chunks, vectors."""
        from ingest.arxiv_client import parse_arxiv_id

        arxiv_id, _ = parse_arxiv_id(ref)
        found = self._existing(arxiv_id)
        if found:
            return self._already(found, progress)
        progress(0.0, f"Looking up arXiv:{arxiv_id}")
        metadata = self.arxiv.by_id(ref)
        return self.add_metadata(metadata, user_id=user_id, progress=progress)

    def add_metadata(self, metadata: PaperMetadata, *, user_id: str = LOCAL_USER,
                     progress: Progress = no_progress) -> AddResult:
        """Add a paper whose arXiv metadata is known (from a search): download its PDF, then add it."""
        found = self._existing(metadata.arxiv_id)
        if found:
            return self._already(found, progress)
        progress(0.05, f"Downloading {metadata.pdf_url}")
        limiter = getattr(self.arxiv, "wait_turn", None)
        path, sha = download_pdf(metadata.pdf_url, self.pdf_dir, before_request=limiter)
        try:
            found = self._existing(file_hash=sha)
            if found:
                return self._already(found, progress)
            return self._add_parsed(path, sha, metadata.arxiv_id, metadata, user_id, progress)
        except BaseException:
            self._discard_if_unreferenced(path, sha)
            raise

    def add_many(self, papers: list[PaperMetadata], *, user_id: str = LOCAL_USER,
                 progress: Progress = no_progress) -> tuple[list[AddResult], list[tuple[str, str]]]:
        """Add search results one by one; a failing paper is reported and the others still go in."""
        results, failures = [], []
        for i, metadata in enumerate(papers):
            def step(fraction: float, message: str, i: int = i) -> None:
                progress((i + fraction) / max(1, len(papers)), f"[{i + 1}/{len(papers)}] {message}")

            try:
                results.append(self.add_metadata(metadata, user_id=user_id, progress=step))
            except (IngestError, ArxivError) as exc:
                failures.append((metadata.arxiv_id, str(exc)))
        return results, failures

    # ----- removing ----------------------------------------------------------------------------------

    def remove(self, paper_ref: str, *, user_id: str | None = None) -> RemoveResult:
        """Remove a paper, its chunks and their vectors; thoughts built on those chunks are flagged."""
        paper_id = self.resolve(paper_ref)
        if paper_id is None:
            raise IngestError(f"No paper '{paper_ref}' in the library.")
        row = dict(self.store.db["papers"].get(paper_id))
        if user_id is not None and row.get("user_id") not in (None, user_id):
            raise IngestError(f"No paper '{paper_ref}' in the library.")
        chunk_ids = [r["id"] for r in self.store.db.query("SELECT id FROM chunks WHERE paper_id = ?", [paper_id])]
        with self.store.transaction() as conn:
            flagged = 0
            if chunk_ids:
                marks = ", ".join("?" * len(chunk_ids))
                sourced = [r[0] for r in conn.execute(
                    f"""SELECT DISTINCT thought_id FROM thought_sources
                        WHERE source_kind = 'chunk' AND source_id IN ({marks})""", chunk_ids)]
                flagged = conn.execute(
                    f"UPDATE thoughts SET flagged = 1 WHERE id IN ({', '.join('?' * len(sourced))})",
                    sourced).rowcount if sourced else 0
                self.store.meta_changed("thoughts", sourced)
                self.store.delete_with_vectors("chunks", chunk_ids)
            conn.execute("DELETE FROM papers WHERE id = ?", [paper_id])
        pdf_path = Path(row["pdf_path"]) if row.get("pdf_path") else None
        if pdf_path and not self._existing(file_hash=row.get("file_hash")):
            pdf_path.unlink(missing_ok=True)
        return RemoveResult(paper_id, len(chunk_ids), flagged)
