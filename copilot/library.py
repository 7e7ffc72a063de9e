"""The paper library: add (idempotent), list, show and remove papers with their chunks and vectors.

Adding is all or nothing: the PDF is staged (copied or downloaded to a temporary file), parsed, chunked and
embedded first; then the paper row, every chunk with its vector, and the move of the staged file to its place go
into one SQLite transaction. A failure at any step leaves the library exactly as it was, and a kill leaves at
most a file no paper uses, which ``python -m copilot doctor`` reports and ``--repair`` removes.

An upload is deduplicated within its owner's library only (by file hash): another user adding the same PDF gets
their own paper (the bytes on disk are shared), and is told nothing about who else holds it. arXiv papers are
shared by everyone, by arXiv id.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from copilot import embeddings
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.storage import Store, utc_now
from copilot.types import Chunk, Paper, PaperSummary
from ingest.arxiv_client import ArxivClient, parse_arxiv_id
from ingest.chunking import ChunkingOptions, chunk_paper
from ingest.download import being_written, download_pdf, stage_upload, stored_name
from ingest.errors import ArxivError, IngestError, InvalidArxivId, PDFError
from ingest.models import PaperChunk, PaperMetadata, ParsedPaper, Progress, no_progress

log = logging.getLogger(__name__)

LOCAL_USER = "local"

# The last papers added in this process, parsed, chunked and embedded, by owner and file: the same PDF added again
# (a paper removed and put back, a Zotero item synced again) is neither parsed nor embedded again. Uploads are kept
# per owner, so how long an add takes tells nobody what another user added; arXiv papers are public and kept for
# everyone. One entry is a paper's text and its chunks' vectors: about a megabyte.
ADDS_KEPT = 16


@dataclass(frozen=True)
class _Kept:
    parsed: ParsedPaper
    texts: tuple[str, ...]  # what was embedded, chunk by chunk
    vectors: np.ndarray
    embedder: object  # the embedder that made them (held, so its identity stays its own)


_kept: OrderedDict[tuple, _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def _recall(key: tuple) -> _Kept | None:
    with _kept_lock:
        if (kept := _kept.get(key)) is not None:
            _kept.move_to_end(key)
        return kept


def _keep(key: tuple, kept: _Kept) -> None:
    with _kept_lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > ADDS_KEPT:
            _kept.popitem(last=False)


@dataclass
class AddResult:
    """What one add did: ``added`` is False when the paper was already in the user's library."""

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


def upload_paper_id(sha256: str, owner: str) -> str:
    """The id of ``owner``'s upload of the PDF with this hash: two owners' copies of one file never share an id
    (uploads stored before owners counted keep their old ``pdf-<hash prefix>`` ids)."""
    return "pdf-" + hashlib.sha256(f"{owner}\0{sha256}".encode()).hexdigest()[:12]


def as_chunk(chunk: PaperChunk) -> Chunk:
    """The chunk record the store keeps, for a chunk cut by :func:`ingest.chunking.chunk_paper`."""
    return Chunk(**asdict(chunk))


class Library:
    """Papers of one data directory."""

    def __init__(
        self,
        store: Store,
        pdf_dir: Path,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        arxiv: ArxivClient | None = None,  # created on first use
        chunking: ChunkingOptions | None = None,
    ) -> None:
        self.store = store
        self.pdf_dir = pdf_dir
        self._embedder = embedder
        self._settings = settings
        self._arxiv = arxiv
        self.chunking = chunking or ChunkingOptions()
        # Told the id of every paper stored anew (the engine reads its sentence vectors ahead of the first question).
        self.on_added: Callable[[str], None] | None = None

    @classmethod
    def open(cls, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
             arxiv: ArxivClient | None = None) -> Library:
        return cls(store or Store.open(settings), settings.data_dir / "pdfs", embedder=embedder, settings=settings,
                   arxiv=arxiv)

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: listing or removing papers needs no model."""
        if self._embedder is None:
            self._embedder = embeddings.get_embedder(self._settings)
        return self._embedder

    @property
    def arxiv(self) -> ArxivClient:
        if self._arxiv is None:
            self._arxiv = ArxivClient(check_reachable=True)  # offline, every arXiv action fails within 3 s
        return self._arxiv

    # ----- look-ups ----------------------------------------------------------------------------------

    def resolve(self, paper_ref: str) -> str | None:
        """The stored id for ``paper_ref``: an exact id, or any form of an arXiv id (URL, prefix, version)."""
        papers = self.store.papers
        if papers.exists(paper_ref):
            return paper_ref
        try:
            arxiv_id, _ = parse_arxiv_id(paper_ref)
        except InvalidArxivId:
            return None
        return arxiv_id if papers.exists(arxiv_id) else None

    def list(self, user_id: str | None = None) -> list[PaperSummary]:
        """Every paper ``user_id`` may see (arXiv papers are public; uploads belong to their user)."""
        return self.store.papers.visible(user_id)

    def show(self, paper_ref: str, user_id: str | None = None) -> Paper:
        """One paper with its metadata, sections (title, level, pages) and reference count."""
        paper_id = self.resolve(paper_ref)
        if paper_id is None:
            raise IngestError(f"No paper '{paper_ref}' in the library; `python -m copilot papers list` shows what is "
                              "there.")
        paper = self.store.papers.get(paper_id, user_id)
        if paper is None:
            raise IngestError(f"No paper '{paper_ref}' in the library.")
        return paper

    def chunks(self, paper_id: str) -> list[Chunk]:
        return self.store.chunks.of_paper(paper_id)

    def _existing(self, paper_id: str) -> Paper | None:
        return self.store.papers.get(paper_id)

    # ----- adding ------------------------------------------------------------------------------------

    def add_pdf(self, path: Path, *, user_id: str = LOCAL_USER, metadata: PaperMetadata | None = None,
                progress: Progress = no_progress) -> AddResult:
        """Add a local PDF (an upload, or a downloaded arXiv PDF when ``metadata`` is given)."""
        source = Path(path)
        progress(0.0, f"Reading {source.name}")
        staged, sha = stage_upload(source, self.pdf_dir)
        try:
            if metadata:
                found = self._existing(metadata.arxiv_id) or self.store.papers.by_hash(sha, None)
                paper_id = metadata.arxiv_id
            else:
                found = self.store.papers.by_hash(sha, user_id)
                paper_id = upload_paper_id(sha, user_id)
            if found:
                return self._already(found, progress)
            return self._add_parsed(staged, sha, paper_id, metadata, user_id, progress, name=source.name)
        finally:
            staged.unlink(missing_ok=True)

    def _already(self, found: Paper, progress: Progress) -> AddResult:
        """The result of adding a paper the user's library already holds, with the passages it has there."""
        progress(1.0, "Already in your library")
        return AddResult(found.id, found.title or "", added=False, n_pages=found.n_pages or 0,
                         n_chunks=len(self.store.chunks.ids_of(found.id)))

    def _place(self, staged: Path, sha: str) -> bool:
        """Move a staged PDF to its place (inside the paper's transaction); False when the file is there already
        (another paper of the same bytes)."""
        final = self.pdf_dir / stored_name(sha)
        if final.exists():
            return False
        os.replace(staged, final)
        return True

    def _discard_unused(self, sha: str) -> None:
        """Delete the stored PDF with this hash if no paper uses it; inside a write transaction, so no add is
        between finding the file in place and committing its paper."""
        with self.store.transaction():
            if not self.store.papers.file_in_use(sha):
                (self.pdf_dir / stored_name(sha)).unlink(missing_ok=True)

    def orphan_files(self, *, remove: bool = False) -> list[tuple[Path, int]]:
        """Files in the PDF folder no paper uses (leftovers of killed adds or removals), with their sizes;
        ``remove`` deletes them. A file an add in progress is still writing is spared."""
        return self.store.unreferenced_files(self.pdf_dir, remove=remove, live=being_written)

    def _add_parsed(self, staged: Path, sha: str, paper_id: str, metadata: PaperMetadata | None, user_id: str,
                    progress: Progress, *, name: str) -> AddResult:
        """Parse, chunk and embed the staged PDF, then store it; ``name`` is the file as the user knows it."""
        from ingest.pdf import parse_pdf  # PyMuPDF takes most of a second to load; only an add needs it

        seconds: dict[str, float] = {}
        start = time.perf_counter()
        progress(0.1, "Parsing the PDF")
        settings = self._settings or Settings.model_construct()
        key = ("" if metadata else user_id, sha, name, settings.pdf_min_text_pages, settings.pdf_max_pages)
        kept = _recall(key)
        if kept is not None:
            parsed = copy.deepcopy(kept.parsed)
        else:
            parsed = parse_pdf(staged, name=name, min_text_pages=settings.pdf_min_text_pages,
                               max_pages=settings.pdf_max_pages)
        seconds["parse"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.3, "Splitting into chunks")
        chunks = [as_chunk(c) for c in chunk_paper(paper_id, parsed, self.embedder.tokenizer, self.chunking)]
        if not any(c.section != "Abstract" for c in chunks):
            raise PDFError(f"{name}: no body text could be extracted, so there is nothing to search.")
        seconds["chunk"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.5, f"Embedding {len(chunks)} chunks")
        texts = tuple(f"{c.section}. {c.text}" for c in chunks)
        if kept is not None and kept.embedder is self.embedder and kept.texts == texts:
            vectors = kept.vectors.copy()
        else:
            kept = None
            vectors = self.embedder.encode_documents(list(texts))
        seconds["embed"] = time.perf_counter() - start

        start = time.perf_counter()
        progress(0.9, "Saving")
        paper = self._paper_record(paper_id, sha, self.pdf_dir / stored_name(sha), Path(name).stem, parsed,
                                   metadata, user_id)
        placed = False
        try:
            with self.store.transaction():
                self.store.papers.add(paper)
                self.store.chunks.add(chunks, vectors)
                placed = self._place(staged, sha)  # the last step before COMMIT: a kill here leaves an orphan file
        except BaseException:
            if placed:
                self._discard_unused(sha)
            raise
        seconds["store"] = time.perf_counter() - start
        _keep(key, kept or _Kept(parsed, texts, vectors, self.embedder))  # not used here again: kept as they are
        if self.on_added is not None:
            try:
                self.on_added(paper_id)
            except Exception:  # noqa: BLE001 - the paper is stored; what follows only makes it faster to ask
                log.exception("after adding %s", paper_id)
        progress(1.0, f"Added {paper.title or paper_id}")
        return AddResult(paper_id, paper.title, added=True, n_chunks=len(chunks), n_pages=parsed.n_pages,
                         warnings=list(parsed.warnings), seconds={k: round(v, 3) for k, v in seconds.items()})

    @staticmethod
    def _paper_record(paper_id: str, sha: str, stored: Path, stem: str, parsed: ParsedPaper,
                      metadata: PaperMetadata | None, user_id: str) -> Paper:
        sections = [{"title": s.title, "level": s.level, "page_start": s.page_start, "page_end": s.page_end,
                     "char_start": s.char_start, "char_end": s.char_end} for s in parsed.sections]
        paper = Paper(
            id=paper_id,
            user_id=None if metadata else user_id,
            source="arxiv" if metadata else "upload",
            title=(metadata.title if metadata else parsed.title) or stem,
            abstract=metadata.abstract if metadata and metadata.abstract else parsed.abstract,
            file_hash=sha,
            pdf_path=str(stored),
            n_pages=parsed.n_pages,
            sections=sections,
            references=list(parsed.references),
            warnings=list(parsed.warnings),
            added_at=utc_now(),
            authors=list(metadata.authors) if metadata else list(parsed.authors),
            published=None if metadata else parsed.year or None,  # an upload's year, from its PDF
            categories=list(metadata.categories) if metadata else [],
        )
        if metadata:
            paper.arxiv_id, paper.version, paper.published = metadata.arxiv_id, metadata.version, metadata.published
            paper.updated, paper.pdf_url, paper.doi = metadata.updated, metadata.pdf_url, metadata.doi
            paper.journal_ref = metadata.journal_ref
            paper.meta = {"comment": metadata.comment, "primary_category": metadata.primary_category}
        return paper

    def add_arxiv(self, ref: str, *, user_id: str = LOCAL_USER, progress: Progress = no_progress) -> AddResult:
        """Add an arXiv paper by id or URL: metadata, PDF download, parse, chunks, vectors."""
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
        staged, sha = download_pdf(metadata.pdf_url, self.pdf_dir, before_request=limiter)
        try:
            found = self.store.papers.by_hash(sha, None)
            if found:
                return self._already(found, progress)
            return self._add_parsed(staged, sha, metadata.arxiv_id, metadata, user_id, progress,
                                    name=f"the PDF of arXiv:{metadata.arxiv_id}")
        finally:
            staged.unlink(missing_ok=True)

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
        paper = self.store.papers.get(paper_id, user_id)
        if paper is None:
            raise IngestError(f"No paper '{paper_ref}' in the library.")
        chunk_ids = self.store.chunks.ids_of(paper_id)
        with self.store.transaction():
            flagged = self.store.thoughts.flag_built_on(chunk_ids)
            self.store.chunks.delete(chunk_ids)
            self.store.papers.delete(paper_id)
        if paper.file_hash:
            self._discard_unused(paper.file_hash)  # a kill before this leaves an orphan file, never a missing one
        return RemoveResult(paper_id, len(chunk_ids), flagged)
