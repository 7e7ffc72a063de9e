"""What the web app does for one user, as plain functions over the engine and the library.

The tabs only lay out components and format results; every rule about who may see or change what lives
here, next to the engine calls, so the two-user guarantees can be tested without a browser.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from copilot.config import Settings
from copilot.engine import AskResult, Copilot
from copilot.storage import Store
from copilot.types import AnswerSources, PaperSummary, QueuePosition, RetrievedItem
from copilot.library import Library
from ingest.models import Progress, abs_url, no_progress

MEMORY_MIN_SCORE = 0.3  # below this a remembered statement is unrelated to the message


def arxiv_url(paper_id: str | None) -> str | None:
    """arXiv papers are stored under their bare id; uploads under ``pdf-<hash>`` have no public page."""
    return None if not paper_id or paper_id.startswith("pdf-") else abs_url(paper_id)


@dataclass
class Services:
    """The engine and library of one running instance, loaded on first use (the page appears at once)."""

    settings: Settings
    _copilot: Copilot | None = None
    _library: Library | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        """The records, opened without the models: raises ``StorageError`` (one line naming the database file and
        what to do) when the database cannot be used; every action asks again, so a repaired file is picked up."""
        with self._lock:
            if self._copilot is not None:
                return self._copilot.store
            if self._store is None:
                self._store = Store.open(self.settings)
            return self._store

    @property
    def copilot(self) -> Copilot:
        store = self.store
        with self._lock:
            if self._copilot is None:
                self._copilot = Copilot.open(self.settings, store=store, adopt_jobs=True)
            return self._copilot

    @property
    def library(self) -> Library:
        copilot = self.copilot
        with self._lock:
            if self._library is None:
                self._library = Library.open(self.settings, store=copilot.store, embedder=copilot.embedder)
            return self._library

    # ----- papers ------------------------------------------------------------------------------------

    def papers(self, user_id: str) -> list[PaperSummary]:
        """The papers this user may see: public arXiv papers and their own uploads."""
        return self.library.list(user_id)

    def visible_paper_ids(self, user_id: str, wanted: list[str] | None) -> list[str] | None:
        """``wanted`` restricted to what the user may see; None means the whole visible library."""
        visible = self.copilot.store.papers.visible_ids(user_id)
        if not wanted:
            return visible
        unknown = [w for w in wanted if w not in visible]
        if unknown:
            raise ValueError(f"Unknown paper(s): {', '.join(unknown)}. Pick papers from your library.")
        return list(wanted)

    def upload(self, paths: list[Path], user_id: str, progress: Progress = no_progress, *,
               quotas: bool = False) -> list[dict[str, Any]]:
        """Add uploaded PDFs one by one; a bad file is reported and the others still go in. ``quotas`` applies the
        per-user upload limits first, refusing the whole batch with one line when it would pass them."""
        from copilot.limits import check_uploads
        from ingest.errors import IngestError

        if quotas:
            check_uploads(self.store, self.settings, user_id, list(paths))
        report = []
        for i, path in enumerate(paths):
            def step(fraction: float, message: str, i: int = i) -> None:
                progress((i + fraction) / max(1, len(paths)), f"[{i + 1}/{len(paths)}] {message}")

            try:
                result = self.library.add_pdf(Path(path), user_id=user_id, progress=step)
                report.append({"file": Path(path).name, "paper_id": result.paper_id, "added": result.added,
                               "ok": True, "message": add_message(result)})
            except IngestError as exc:
                report.append({"file": Path(path).name, "paper_id": None, "added": False, "ok": False,
                               "message": str(exc)})
        return report

    def add_arxiv(self, refs: list[str], user_id: str, known: dict[str, Any] | None = None,
                  progress: Progress = no_progress, *, quotas: bool = False) -> list[dict[str, Any]]:
        """Add arXiv papers by id or URL (``known``: metadata from a search, so no second look-up).

        With ``quotas``, before any look-up: a batch with more new papers than the user's arXiv additions left
        today is refused whole, and each look-up counts as an arXiv request; the additions are then counted in the
        same transaction that checks the allowance.
        """
        from copilot.limits import LimitExceeded, admit_arxiv_adds, admit_search, arxiv_additions_left
        from ingest.errors import ArxivError, ArxivUnavailable

        known = known or {}
        refs = list(dict.fromkeys(r.strip() for r in refs if r and r.strip()))
        store = self.store
        if quotas:
            new = [ref for ref in refs if not store.papers.exists(ref)]
            left = arxiv_additions_left(store, self.settings, user_id)
            if len(new) > left:
                raise LimitExceeded(f"{len(new)} new papers is more than the {left} arXiv additions you have left "
                                    "today: add fewer, or come back tomorrow.")
            admit_search(store, self.settings, user_id, sum(ref not in known for ref in new))
        wanted, report = [], []
        for ref in refs:  # ids typed through the API have no search result: look them up
            try:
                wanted.append(known[ref] if ref in known else self.library.arxiv.by_id(ref))
            except ArxivUnavailable as exc:
                report.append({"ref": ref, "ok": False, "message": f"arXiv is unavailable. {exc}"})
            except ArxivError as exc:
                report.append({"ref": ref, "ok": False, "message": f"failed: {exc}"})
        if quotas:
            fresh = sum(1 for m in wanted if not store.papers.exists(m.arxiv_id))
            admit_arxiv_adds(store, self.settings, user_id, fresh)
        results, failures = self.library.add_many(wanted, user_id=user_id, progress=progress)
        report += [{"ref": r.paper_id, "ok": True, "message": add_message(r)} for r in results]
        report += [{"ref": ref, "ok": False, "message": f"failed: {why}"} for ref, why in failures]
        return report

    def refresh(self, user_id: str, categories: list[str], progress: Progress = no_progress, *,
                quotas: bool = False) -> Any:  # noqa: ANN401 - a refresh.RefreshResult
        """Pull the newest papers of ``categories`` into the shared library. With ``quotas`` each category is one
        arXiv request, and the refresh stops at the user's arXiv additions left today, which it then uses up."""
        from copilot.limits import admit_search, arxiv_allowance_left
        from copilot.tasks.refresh import refresh_categories

        allowance = None
        if quotas:
            allowance = arxiv_allowance_left(self.store, self.settings, user_id)
            admit_search(self.store, self.settings, user_id, len(categories))
        result = refresh_categories(self.library, categories, user_id=user_id, max_added=allowance,
                                    progress=progress)
        if quotas:
            self.store.usage.record(user_id, "arxiv_add", len(result.added))
        return result

    def remove(self, paper_id: str, user_id: str, *, may_remove_public: bool) -> dict[str, Any]:
        """Remove a paper: one's own uploads always; shared arXiv papers only where one user owns the instance."""
        from ingest.errors import IngestError

        paper_id = (paper_id or "").strip()
        if not paper_id:
            raise ValueError("Choose a paper to remove.")
        paper = next((p for p in self.papers(user_id) if p.id == paper_id), None)
        if paper is None:
            raise ValueError(f"No paper '{paper_id}' in your library.")
        if paper.shared and not may_remove_public:
            raise ValueError("arXiv papers are shared by everyone on this instance; only your uploads can be removed.")
        try:
            result = self.library.remove(paper_id, user_id=user_id)
        except IngestError as exc:
            raise ValueError(str(exc)) from exc
        return {"paper_id": result.paper_id, "chunks_removed": result.chunks_removed,
                "thoughts_flagged": result.thoughts_flagged}

    # ----- chat --------------------------------------------------------------------------------------

    def chat_stream(self, user_id: str, message: str, *, paper_ids: list[str] | None = None,
                    include_public: bool = False, share_thought: bool = False
                    ) -> Iterator[AnswerSources | QueuePosition | str | AskResult]:
        """One chat turn, as the Chat tab runs it: refused when the line for the model is full; embed the message
        once (memories, then sources), personalise with the persona and recalled memories, then
        :meth:`Copilot.ask_stream` (its :class:`AnswerSources` carries the recalled memories too); once it is
        answered, keep what the user said about themselves."""
        from copilot.limits import admit_answer

        copilot = self.copilot
        admit_answer(copilot.llm, self.settings)
        vector = copilot.embedder.encode_query(message)
        about, memories = self.about_user(user_id, message, vector)
        for update in copilot.ask_stream(message, user_id=user_id, paper_ids=paper_ids, include_public=include_public,
                                         share_thought=share_thought, about_user=about, query_vector=vector):
            if isinstance(update, AnswerSources):
                update.memories = memories
            elif isinstance(update, AskResult):
                self.remember_statements(user_id, message)  # only from a message that was answered
            yield update

    def remember_statements(self, user_id: str, message: str) -> None:
        """Keep what the user said about themselves in ``message``; past the memory limits (length, count),
        nothing more is kept and the answer stands."""
        from copilot.limits import LimitExceeded
        from copilot.tasks.profile import extract_self_statements

        for statement in extract_self_statements(message):
            try:
                self.copilot.remember(statement, user_id=user_id)
            except LimitExceeded:
                continue

    def about_user(self, user_id: str, message: str, vector: np.ndarray) -> tuple[str | None, list[dict[str, Any]]]:
        """The persona plus the user's memories this message calls for (the association score finds them)."""
        from copilot.tasks.profile import persona_for_prompt

        copilot = self.copilot
        recalled = copilot.recall(message, user_id=user_id, k=3, query_vector=vector)
        memories = [m for m in recalled if m["score"] >= MEMORY_MIN_SCORE][:2]
        persona = persona_for_prompt(copilot.store, user_id)
        parts = [persona[:300]] if persona else []
        parts += [m["text"] for m in memories]
        return (" ".join(parts) or None), memories

    # ----- thoughts ----------------------------------------------------------------------------------

    def thoughts(self, user_id: str) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self.copilot.memory.list(user_id)]

    def thought(self, thought_id: int, user_id: str) -> dict[str, Any]:
        """One of the user's thoughts (or a public one) with its provenance resolved to papers and thoughts."""
        found = self.copilot.memory.get(int(thought_id), user_id)
        if found is None:
            raise ValueError(f"No thought #{thought_id} for this user.")
        row = found.to_dict()
        row["provenance"] = [self._source(s["kind"], int(s["id"]), user_id) for s in row.pop("sources")]
        return row

    def _source(self, kind: str, source_id: int, user_id: str) -> dict[str, Any]:
        store = self.copilot.store
        if kind == "thought":
            thought = store.thoughts.visible(source_id, user_id)
            if thought is None:
                return {"kind": "thought", "id": source_id, "text": "(deleted or not yours)"}
            return {"kind": "thought", "id": thought.id, "text": thought.text, "depth": thought.depth,
                    "confidence": thought.confidence}
        chunk = store.chunks.visible(source_id, user_id)
        if chunk is None:
            return {"kind": "chunk", "id": source_id, "text": "(removed from the library)"}
        return {"kind": "chunk", "id": chunk.id, "text": chunk.text, "paper_id": chunk.paper_id,
                "title": chunk.paper_title, "section": chunk.section, "page": chunk.page_start,
                "url": arxiv_url(chunk.paper_id)}

    def delete_thought(self, thought_id: int, user_id: str) -> bool:
        return self.copilot.memory.delete(int(thought_id), user_id)

    def query(self, query_id: int, user_id: str) -> dict[str, Any]:
        """One of the user's answered questions with the thought it produced (outcome 'pending' until written)."""
        found = self.copilot.store.queries.get(int(query_id), user_id)
        if found is None:
            raise ValueError(f"No answer #{int(query_id)} for this user.")
        return {"id": found.id, "text": found.text, "thought_id": found.thought_id,
                "thought_outcome": found.thought_outcome, "thought_reason": found.thought_reason,
                "created_at": found.created_at}

    def wait_for_thought(self, query_id: int, user_id: str, timeout_s: float) -> dict[str, Any]:
        """The query once its thought is written (or as it is after ``timeout_s``): the background worker
        writes thoughts in order, so this answer's thought may wait behind others'."""
        deadline = time.monotonic() + timeout_s
        while True:
            row = self.query(query_id, user_id)
            if row["thought_outcome"] != "pending" or time.monotonic() > deadline:
                return row
            time.sleep(0.25)

    def feedback_history(self, user_id: str) -> list[dict[str, Any]]:
        return [{"query_id": f.query_id, "value": f.value, "created_at": f.created_at}
                for f in self.copilot.store.queries.feedback(user_id)]


def add_message(result: Any) -> str:  # noqa: ANN401 - an ingest AddResult
    """One line on what adding a paper did, for the Library tab's notice."""
    if not result.added:
        return f"already in your library as {result.paper_id}"
    warnings = f" (warnings: {'; '.join(result.warnings)})" if result.warnings else ""
    return f"added as {result.paper_id}, {result.n_chunks} chunks{warnings}"


def source_line(n: int, item: RetrievedItem) -> str:
    """One line of an answer's source list, in Markdown, with a link where the paper has a public page."""
    if item.kind == "thought":
        conf = f", confidence {item.confidence:.2f}" if item.confidence is not None else ""
        return f"[{n}] Thought #{item.id} (depth {item.depth}{conf})"
    pages = f"p. {item.page_start}" if item.page_start == item.page_end else f"pp. {item.page_start}-{item.page_end}"
    title = item.paper_title or item.paper_id
    url = arxiv_url(item.paper_id)
    link = f" [arXiv:{item.paper_id}]({url})" if url else ""
    return f"[{n}] *{title}*, {item.section or 'body'}, {pages}{link}"


def retrieved_rows(items: list[RetrievedItem], provenance: dict[int, str]) -> list[list[Any]]:
    """The table of retrieved items beside an answer: what it is, how deep, how sure, how similar."""
    rows = []
    for n, item in enumerate(items, start=1):
        where = (item.paper_title or item.paper_id or "") if item.kind == "chunk" else provenance.get(item.id, "")
        rows.append([n, item.kind, item.id, item.depth, None if item.confidence is None else round(item.confidence, 3),
                     round(item.score, 3), item.recalled_by, where, item.text[:160]])
    return rows


def provenance_summary(services: Services, thought_ids: list[int]) -> dict[int, str]:
    """``thought id -> "from chunk #3, thought #7"`` for the thoughts in a retrieved list."""
    if not thought_ids:
        return {}
    edges = services.copilot.store.thoughts.sources_of(thought_ids)
    return {t: "from " + ", ".join(f"{s.kind} #{s.id}" for s in v) if v else "" for t, v in edges.items()}
