"""The copilot: the one facade the web app, the command line and the evaluation call.

:class:`Copilot` answers questions (the pipeline is :class:`copilot.answering.Answerer`) and holds every rule a
user can hit: which papers they may see, add and remove, their quotas, the personalised chat turn (persona and
recalled memories), their thoughts and answered questions, feedback, drafts, trends and profile. A refused
request raises a :class:`copilot.errors.UserError` (a record that is not the user's: :class:`NotFound`) whose
message is the one line the user reads.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from copilot import access, followups, prompts
from copilot.answering import (
    DEFAULT_USER, QUEUE_POLL_S, Answerer, AskResult, ThoughtWorker, source_text, stream_until_repeating,
    trim_repetition,
)
from copilot.config import Settings
from copilot.conversations import export_markdown, sources_of, title_from
from copilot.embeddings import Embedder, get_embedder
from copilot.access import MAX_TOKEN_NAME_CHARS
from copilot.errors import NotFound, UserError
from copilot.followups import FollowUp
from copilot.eval.runs import FEEDBACK_SIGNAL, self_evolution_curve
from copilot.library import AddResult, Library
from copilot.limits import (
    LimitExceeded, admit_address, admit_answer, admit_arxiv_adds, admit_compare_cells, admit_page, admit_question,
    admit_search, arxiv_additions_left, GUEST_PREFIX, arxiv_allowance_left, check_question, check_uploads, is_guest,
    refund_compare_cells,
)
from copilot.llm import ChatModel, get_llm, scheduling
from copilot.memories import MEMORY_MIN_SCORE, PersonalMemories
from copilot.storage import Store
from copilot.tasks import bibliography, writing
from copilot.tasks.profile import (
    kept_as_written, language_for_prompt, profile_from_author, profile_from_text, save_answer_language, save_profile,
)
from copilot.tasks.refresh import (
    RefreshResult,
    followed_categories,
    last_refresh,
    normalise_category,
    refresh_categories,
    set_followed_categories,
)
from copilot.tasks.trends import Trends, trends_and_ideas
from copilot.tasks.compare import Comparison, check_request, compare_stream
from copilot.tasks.writing import Draft
from copilot.types import (
    AccessToken, AnswerSources, ComparisonCell, Conversation, ImportedEntry, PaperSummary, Passage, Profile,
    QueuePosition, Refresh,
)
from ingest.errors import ArxivError, ArxivNotFound, ArxivUnavailable, IngestError
from ingest.models import PaperMetadata, Progress, abs_url, no_progress
from ingest.table_text import is_cell_table


__all__ = ["DEFAULT_USER", "FEEDBACK_SIGNAL", "MEMORY_MIN_SCORE", "QUEUE_POLL_S", "AskResult", "Copilot",
           "ThoughtWorker", "add_message", "arxiv_url", "source_text", "stream_until_repeating", "trim_repetition"]

EXAMPLE_PAPERS = 3  # papers a first visit's "Add example papers" brings in
DRAFTS = {"abstract": "draft_abstract", "synthesis": "draft_synthesis", "related": "draft_related_work"}


def arxiv_url(paper_id: str | None) -> str | None:
    """arXiv papers are stored under their bare id; uploads under ``pdf-<hash>`` have no public page."""
    return None if not paper_id or paper_id.startswith("pdf-") else abs_url(paper_id)


logger = logging.getLogger(__name__)


def _folded(text: str) -> str:
    """``text`` for matching: lower case, accents dropped ("Gödel" matches "godel")."""
    return "".join(c for c in unicodedata.normalize("NFKD", (text or "").lower()) if not unicodedata.combining(c))


def add_message(result: AddResult) -> str:
    """One line on what adding a paper did, for the Library tab's notice."""
    if not result.added:
        return f"already in your library as {result.paper_id}"
    warnings = f" (warnings: {'; '.join(result.warnings)})" if result.warnings else ""
    return f"added as {result.paper_id}, {result.n_chunks} chunks{warnings}"


class Copilot(Answerer):
    """Questions in, cited answers out, thoughts remembered; and everything one user may do with the library."""

    def __init__(self, settings: Settings, store: Store, embedder: Embedder, llm: ChatModel, *,
                 adopt_jobs: bool = False, library: Library | None = None, read_ahead: bool = False) -> None:
        """``adopt_jobs``: the background worker also writes the thoughts other processes answered and left
        (a replica of the web app; a command that asks one question leaves them to it). ``library``: the
        papers' library over this store (default: opened on first use). ``read_ahead``: a process that lives on
        after adding a paper (the web app) reads its sentences ahead of its first question (:meth:`warm_paper`), and
        what the model's answers need at start-up."""
        super().__init__(settings, store, embedder, llm, adopt_jobs=adopt_jobs, read_ahead=read_ahead)
        self.memories = PersonalMemories(store, embedder, settings, self.associative_vector)
        self.read_ahead = read_ahead
        self._library = self._watched(library) if library is not None else None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, settings: Settings, *, store: Store | None = None, adopt_jobs: bool = False,
             read_ahead: bool = False) -> Copilot:
        """The engine of ``settings``' data directory (the store first: an unusable database fails before the
        models load)."""
        return cls(settings, store or Store.open(settings), get_embedder(settings), get_llm(settings),
                   adopt_jobs=adopt_jobs, read_ahead=read_ahead)

    def _watched(self, library: Library) -> Library:
        """``library``, telling this engine of each paper it adds when the engine reads ahead."""
        if self.read_ahead:
            library.on_added = self.warm_paper
        return library

    @property
    def library(self) -> Library:
        with self._lock:
            if self._library is None:
                self._library = self._watched(Library.open(self.settings, store=self.store, embedder=self.embedder))
            return self._library

    @library.setter
    def library(self, library: Library) -> None:
        with self._lock:
            self._library = self._watched(library)

    # ----- quotas ------------------------------------------------------------------------------------

    def admit(self, user_id: str, action: str = "question", n: int = 1, *, address: str | None = None) -> None:
        """Count a request of ``user_id`` against its per-minute limit: a model request (``question``: a question,
        a draft, ideas), ``n`` arXiv requests (``search``) or a cited passage drawn on its page (``page``). A guest's
        request from a known client ``address`` is also counted against that address's allowance (``question``,
        ``memory``, ``upload``)."""
        if action == "search":
            admit_search(self.store, self.settings, user_id, n)
        elif action == "question":
            admit_question(self.store, self.settings, user_id)
        elif action == "page":
            admit_page(self.store, self.settings, user_id)
        if address is not None and is_guest(user_id):
            admit_address(self.store, self.settings, address, action, n)

    # ----- papers ------------------------------------------------------------------------------------

    def papers(self, user_id: str, matching: str = "") -> list[PaperSummary]:
        """The papers this user may see: public arXiv papers and their own uploads; ``matching``: only those whose
        id, title or authors hold every word of it (case and accents aside)."""
        if len(matching or "") > self.settings.max_filter_chars:
            raise UserError(f"A library filter is at most {self.settings.max_filter_chars} characters: type a few "
                            "words of a title, an author or an id.")
        papers = self.library.list(user_id)
        words = set(_folded(matching).split())
        if not words:
            return papers
        folded = {p.id: _folded(" ".join([p.id, p.arxiv_id or "", p.title or "", *p.authors])) for p in papers}
        return [p for p in papers if all(w in folded[p.id] for w in words)]

    def visible_paper_ids(self, user_id: str, wanted: list[str] | None) -> list[str]:
        """``wanted`` restricted to what the user may see; none wanted means the whole visible library."""
        visible = self.store.papers.visible_ids(user_id)
        if not wanted:
            return visible
        unknown = [w for w in wanted if w not in visible]
        if unknown:
            raise UserError(f"Unknown paper(s): {', '.join(unknown)}. Pick papers from your library.")
        return list(wanted)

    def arxiv_reachable(self) -> bool:
        """Whether arXiv can be reached now (a short connection check, remembered for a minute; True for a client
        that does not check)."""
        check = getattr(self.library.arxiv, "reachable", None)
        return bool(check()) if check else True

    def search_arxiv(self, query: str, field: str, max_results: int) -> list[PaperMetadata]:
        """arXiv papers by free text, title, author or category."""
        client = self.library.arxiv
        text = (query or "").strip()
        if field == "author":
            return client.by_author(text, max_results=max_results)
        if field == "category":
            return client.by_category(text, max_results=max_results)
        if field == "title":
            return client.search(f'ti:"{text}"' if text else "", max_results=max_results)
        return client.search(text, max_results=max_results)

    def upload(self, paths: list[Path], user_id: str, progress: Progress = no_progress, *,
               quotas: bool = False) -> list[dict[str, Any]]:
        """Add uploaded PDFs one by one; a bad file is reported and the others still go in. ``quotas`` applies the
        per-user upload limits first, refusing the whole batch with one line when it would pass them."""
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

    def add_arxiv(self, refs: list[str], user_id: str, known: dict[str, PaperMetadata] | None = None,
                  progress: Progress = no_progress, *, quotas: bool = False) -> list[dict[str, Any]]:
        """Add arXiv papers by id or URL (``known``: metadata from a search, so no second look-up).

        With ``quotas``, before any look-up: a batch with more new papers than the user's arXiv additions left
        today is refused whole, and each look-up counts as an arXiv request; the additions are then counted in the
        same transaction that checks the allowance.
        """
        known = known or {}
        refs = list(dict.fromkeys(r.strip() for r in refs if r and r.strip()))
        store = self.store
        # Any form of a stored arXiv id needs no look-up (an upload's id names no arXiv paper: never "found" here).
        stored = {ref: found if (found := self.library.resolve(ref)) and arxiv_url(found) else None for ref in refs}
        report: list[dict[str, Any]] = [{"ref": found, "ok": True, "status": "already in the library",
                                         "message": f"already in your library as {found}"}
                                        for found in dict.fromkeys(v for v in stored.values() if v)]
        new = [ref for ref in refs if not stored[ref]]
        if quotas:
            left = arxiv_additions_left(store, self.settings, user_id)
            if len(new) > left:
                raise LimitExceeded(f"{len(new)} new papers is more than the {left} arXiv additions you have left "
                                    "today: add fewer, or come back tomorrow.")
            admit_search(store, self.settings, user_id, sum(ref not in known for ref in new))
        wanted = []
        for ref in new:  # ids typed through the API have no search result: look them up
            try:
                wanted.append(known[ref] if ref in known else self.library.arxiv.by_id(ref))
            except ArxivUnavailable as exc:
                report.append({"ref": ref, "ok": False, "status": "failed", "message": f"arXiv is unavailable. {exc}"})
            except ArxivNotFound as exc:
                report.append({"ref": ref, "ok": False, "status": "not found", "message": f"failed: {exc}"})
            except ArxivError as exc:
                report.append({"ref": ref, "ok": False, "status": "failed", "message": f"failed: {exc}"})
        if quotas:
            fresh = sum(1 for m in wanted if not store.papers.exists(m.arxiv_id))
            admit_arxiv_adds(store, self.settings, user_id, fresh)
        results, failures = self.library.add_many(wanted, user_id=user_id, progress=progress)
        report += [{"ref": r.paper_id, "ok": True, "status": "added" if r.added else "already in the library",
                    "message": add_message(r)} for r in results]
        report += [{"ref": ref, "ok": False, "status": "failed", "message": f"failed: {why}"} for ref, why in failures]
        return report

    def import_bibtex(self, source: str | Path, user_id: str, progress: Progress = no_progress, *,
                      quotas: bool = False) -> list[ImportedEntry]:
        """Import a BibTeX file (a path: an uploaded file) or its text: arXiv entries are added (as
        :meth:`add_arxiv` adds, ``quotas`` included), DOIs listed, local PDFs offered for upload (never read);
        a malformed or oversized file raises one UserError and adds nothing (see
        :mod:`copilot.tasks.bibliography`)."""
        return bibliography.import_bibtex(self, source, user_id, progress, quotas=quotas)

    def add_example_papers(self, category: str, user_id: str, progress: Progress = no_progress, *,
                           quotas: bool = False) -> list[dict[str, Any]]:
        """A first library: the ``EXAMPLE_PAPERS`` newest arXiv papers of ``category``, added as :meth:`add_arxiv`
        adds them (with ``quotas``, one arXiv request for the listing, then the additions' allowance). Raises
        :class:`ArxivUnavailable` offline: the caller says that uploading still works."""
        category = normalise_category(category)
        if quotas:
            admit_search(self.store, self.settings, user_id, 1)
        newest = self.library.arxiv.by_category(category, max_results=EXAMPLE_PAPERS)[:EXAMPLE_PAPERS]
        if not newest:
            raise UserError(f"arXiv lists no recent papers in {category}; choose another category.")
        return self.add_arxiv([m.arxiv_id for m in newest], user_id, {m.arxiv_id: m for m in newest}, progress,
                              quotas=quotas)

    def refresh(self, user_id: str, categories: list[str], progress: Progress = no_progress, *,
                quotas: bool = False) -> RefreshResult:
        """Pull the newest papers of ``categories`` into the shared library. With ``quotas`` each category is one
        arXiv request, and the refresh stops at the user's arXiv additions left today, which it then uses up."""
        allowance = None
        if quotas:
            allowance = arxiv_allowance_left(self.store, self.settings, user_id)
            admit_search(self.store, self.settings, user_id, len(categories))
        result = refresh_categories(self.library, categories, user_id=user_id, max_added=allowance,
                                    progress=progress)
        if quotas:
            self.store.usage.record(user_id, "arxiv_add", len(result.added))
        return result

    def expire_idle_guests(self, days: float | None = None) -> dict[str, int]:
        """Delete everything of the guests with no activity for ``days`` (default ``COPILOT_GUEST_DAYS``): their
        uploads with their files and passages, thoughts, memories, questions and conversations. Their cookies have
        expired by then, so nobody could open those spaces again. Returns what went: guests, papers, rows."""
        days = self.settings.guest_days if days is None else days
        cutoff = (datetime.now(UTC) - timedelta(days=days)).isoformat()
        guests = self.store.guests.idle(GUEST_PREFIX, cutoff)
        papers = rows = 0
        expired = 0
        for user_id in guests:
            try:  # one guest that cannot be removed now (it is retried next time) holds back none of the others
                for paper_id in self.store.guests.papers_of(user_id):
                    removed = self.library.remove(paper_id, user_id=user_id)
                    papers += 1
                    rows += removed.chunks_removed
                rows += self.store.guests.forget(user_id)
                expired += 1
            except Exception:  # noqa: BLE001 - logged with its traceback
                logger.exception("could not expire guest %s", user_id)
        if guests:
            logger.info("expired %d idle guests: %d papers, %d rows", expired, papers, rows)
        return {"guests": expired, "papers": papers, "rows": rows}

    def follow(self, user_id: str, categories: list[str]) -> list[str]:
        """Follow arXiv categories for the scheduled refresh; returns them as saved."""
        return set_followed_categories(self.store, user_id, categories)

    def followed(self, user_id: str) -> list[str]:
        return followed_categories(self.store, user_id)

    def last_refresh(self, user_id: str) -> Refresh | None:
        return last_refresh(self.store, user_id)

    def remove_many(self, paper_ids: list[str], user_id: str, *, may_remove_public: bool) -> dict[str, Any]:
        """Remove several papers at once, by the rules of :meth:`remove`; every id is checked before any paper is
        removed, so a list naming one paper that cannot go removes none."""
        wanted = list(dict.fromkeys((p or "").strip() for p in paper_ids or [] if (p or "").strip()))
        if not wanted:
            raise UserError("Choose the papers to remove first.")
        visible = {p.id: p for p in self.papers(user_id)}
        unknown = [p for p in wanted if p not in visible]
        if unknown:
            raise NotFound(f"No paper {', '.join(repr(p) for p in unknown[:5])} in your library; nothing was removed.")
        shared = [p for p in wanted if visible[p].shared]
        if shared and not may_remove_public:
            raise UserError(f"{len(shared)} of these are arXiv papers, shared by everyone on this instance; only your "
                            "uploads can be removed. Nothing was removed.")
        results, failed = [], []
        for paper_id in wanted:
            try:
                results.append(self._remove(paper_id, user_id))
            except UserError as exc:  # gone meanwhile (another tab removed it): the rest still go
                failed.append(f"{paper_id}: {exc}")
        return {"removed": [r["paper_id"] for r in results], "failed": failed,
                "chunks_removed": sum(r["chunks_removed"] for r in results),
                "thoughts_flagged": sum(r["thoughts_flagged"] for r in results)}

    def remove(self, paper_id: str, user_id: str, *, may_remove_public: bool) -> dict[str, Any]:
        """Remove a paper: one's own uploads always; shared arXiv papers only where one user owns the instance."""
        paper_id = (paper_id or "").strip()
        if not paper_id:
            raise UserError("Choose a paper to remove.")
        paper = next((p for p in self.papers(user_id) if p.id == paper_id), None)
        if paper is None:
            raise NotFound(f"No paper '{paper_id}' in your library.")
        if paper.shared and not may_remove_public:
            raise UserError("arXiv papers are shared by everyone on this instance; only your uploads can be removed.")
        return self._remove(paper_id, user_id)

    def _remove(self, paper_id: str, user_id: str) -> dict[str, Any]:
        """Remove a paper already checked by :meth:`remove` or :meth:`remove_many`."""
        try:
            result = self.library.remove(paper_id, user_id=user_id)
        except IngestError as exc:
            raise UserError(str(exc)) from exc
        return {"paper_id": result.paper_id, "chunks_removed": result.chunks_removed,
                "thoughts_flagged": result.thoughts_flagged}

    def source_page(self, user_id: str | None, chunk_id: int) -> Passage:
        """A cited chunk on its PDF page(s), its words highlighted (:mod:`copilot.passages`), with its section.

        A chunk of a paper the user may not see is refused as a missing one is, so its id tells nothing; a
        paper whose stored PDF is gone says so (its chunks still answer questions)."""
        from copilot.passages import render_passage

        chunk, paper = self._visible_source(user_id, chunk_id)
        stored = Path(paper.pdf_path or "")
        # The data directory may have moved since the paper was added: the file keeps its name in pdfs/.
        pdf = next((p for p in (stored, self.library.pdf_dir / stored.name) if paper.pdf_path and p.is_file()), None)
        if pdf is None:
            raise UserError(f"The PDF of \"{paper.title or paper.id}\" is no longer stored, so its pages cannot be "
                            "shown; add the paper again to see them.")
        try:
            shown = render_passage(pdf, chunk.text, chunk.page_start, chunk.page_end, dpi=self.settings.passage_dpi,
                                   max_side_px=self.settings.passage_max_side_px,
                                   region=chunk.bbox if is_cell_table(chunk.text) or chunk.section == "Figure" else None,
                                   crop=chunk.section == "Figure" and chunk.bbox is not None)
        except (RuntimeError, ValueError) as exc:  # PyMuPDF's errors on a file damaged since it was parsed
            # The detail (which may name the server's file) goes to the log, not to the visitor.
            logger.warning("rendering chunk %s of %s failed: %s", chunk.id, paper.id, exc)
            raise UserError(f"The PDF of \"{paper.title or paper.id}\" could not be read: it may be damaged; add "
                            "the paper again to see its pages.") from exc
        return Passage(chunk.id, paper.id, paper.title, chunk.section, chunk.text, chunk.page_start, chunk.page_end,
                       shown.pages, shown.png, shown.width, shown.height, highlights=shown.located.rects,
                       coverage=round(shown.located.coverage, 3))

    def _visible_source(self, user_id: str | None, chunk_id: int) -> tuple[Any, Any]:
        """A chunk of a paper the user may see, and its paper; any other id is refused as a missing one is, so an
        id tells nothing."""
        chunk = self.store.chunks.visible(int(chunk_id), user_id)
        paper = self.store.papers.get(chunk.paper_id, user_id) if chunk is not None else None
        if chunk is None or paper is None or chunk.id is None:
            raise NotFound(f"No source #{int(chunk_id)} in your library.")
        return chunk, paper

    def passage_text(self, user_id: str, chunk_id: int) -> dict[str, Any]:
        """A source's text with its paper, section and pages (what an agent quotes), for a chunk of a paper the
        user may see (:meth:`_visible_source`)."""
        chunk, paper = self._visible_source(user_id, chunk_id)
        return {"id": chunk.id, "paper_id": paper.id, "title": paper.title, "section": chunk.section,
                "page_start": chunk.page_start, "page_end": chunk.page_end, "text": chunk.text}

    # ----- Zotero ------------------------------------------------------------------------------------

    def connect_zotero(self, user_id: str, library_id: str, api_key: str = "", *, library_type: str = "user",
                       collection: str = "", local: bool = False) -> dict[str, Any]:
        """Keep the user's Zotero connection: a user or group library by id, the key sealed with the instance
        secret (none: a public library, or Zotero's local API), optionally one collection. Replaces any earlier
        one; the same library again keeps its stored key (unless a new one is given) and where its sync was."""
        library_id, collection = (library_id or "").strip(), (collection or "").strip()
        api_key = (api_key or "").strip()
        if library_type not in ("user", "group"):
            raise UserError("A Zotero library is a 'user' or a 'group' library.")
        if not re.fullmatch(r"\d{1,12}", library_id) and not (local and library_id in ("", "0")):
            raise UserError("A Zotero library id is a number: your user id is on zotero.org/settings/keys.")
        if collection and not re.fullmatch(r"[A-Z0-9]{8}", collection):
            raise UserError("A Zotero collection key is 8 letters and digits (e.g. ABCD2345), from the collection's "
                            "web address.")
        if api_key and not re.fullmatch(r"[A-Za-z0-9]{8,64}", api_key):
            raise UserError("That does not look like a Zotero API key (letters and digits, from "
                            "zotero.org/settings/keys).")
        library_id = library_id or "0"
        found = self.store.zotero.connection(user_id)
        if found is not None and (found["library_type"], found["library_id"], found["collection"],
                                  bool(found["local"])) == (library_type, library_id, collection, local):
            if api_key:  # the same library: a new key, and the sync goes on from where it was
                self.store.zotero.replace_key(user_id, access.seal(self.settings, api_key))
            return self.zotero_connection(user_id) or {}
        sealed = access.seal(self.settings, api_key) if api_key else ""
        self.store.zotero.connect(user_id, library_type=library_type, library_id=library_id,
                                  sealed_key=sealed, collection=collection, local=local)
        return self.zotero_connection(user_id) or {}

    def zotero_connection(self, user_id: str) -> dict[str, Any] | None:
        """The user's Zotero connection as they may see it (never the key itself), or None."""
        found = self.store.zotero.connection(user_id)
        if found is None:
            return None
        return {"library_type": found["library_type"], "library_id": found["library_id"],
                "collection": found["collection"], "local": bool(found["local"]), "has_key": bool(found["sealed_key"]),
                "library_version": found["library_version"], "synced_at": found["synced_at"]}

    def disconnect_zotero(self, user_id: str) -> None:
        """Delete the user's Zotero connection and its key (the papers it brought stay)."""
        if not self.store.zotero.disconnect(user_id):
            raise NotFound("No Zotero library is connected.")

    def sync_zotero(self, user_id: str, progress: Progress = no_progress, *, quotas: bool = False,
                    address: str | None = None) -> dict[str, Any]:
        """Take what is new or changed in the user's Zotero library (:func:`copilot.tasks.zotero.sync`); with
        ``quotas``, each paper counts against the user's allowances, and a guest's against its client
        ``address``'s."""
        from copilot.tasks import zotero

        found = self.store.zotero.connection(user_id)
        key = access.unseal(self.settings, found["sealed_key"]) if found and found["sealed_key"] else None
        return zotero.sync(self, user_id, key, progress, quotas=quotas, address=address)

    # ----- personal access tokens (agents) -----------------------------------------------------------

    def create_access_token(self, user_id: str, name: str) -> tuple[AccessToken, str]:
        """A new personal access token of ``user_id`` named ``name``, and its secret: shown to the user once,
        kept only as its hash. At most ``COPILOT_MAX_ACCESS_TOKENS`` per user."""
        name = " ".join((name or "").split())[:MAX_TOKEN_NAME_CHARS] or "agent"
        secret = access.new_secret()
        limit = self.settings.max_access_tokens
        token = self.store.access_tokens.create(user_id, name, access.token_hash(secret), limit=limit)
        if token is None:
            raise LimitExceeded(f"You hold {limit} access tokens, the most one user may: revoke one you no longer "
                                "use first.")
        return token, secret

    def access_tokens(self, user_id: str) -> list[AccessToken]:
        """The user's personal access tokens (names and dates; never their secrets), the newest first."""
        return self.store.access_tokens.of(user_id)

    def revoke_access_token(self, user_id: str, token_id: int) -> None:
        """Revoke (delete) one of the user's tokens: calls with it are refused from now on."""
        if not self.store.access_tokens.revoke(user_id, int(token_id)):
            raise NotFound(f"You hold no access token #{int(token_id)}.")

    def token_user(self, secret: str) -> str | None:
        """The user a personal access token acts as; None for an unknown or revoked one."""
        if not access.well_formed(secret):
            return None
        found = self.store.access_tokens.user_of(access.token_hash(secret))
        if found is None:
            return None
        user_id, created_at = found
        # A guest's token lasts no longer than a guest's cookie: after that, the guest's space is forgotten.
        if is_guest(user_id) and datetime.fromisoformat(created_at) < datetime.now(UTC) - timedelta(
                days=self.settings.guest_days):
            return None
        return user_id

    # ----- the personalised ask ----------------------------------------------------------------------

    def chat_stream(self, user_id: str, message: str, *, paper_ids: list[str] | None = None,
                    include_public: bool = False, share_thought: bool = False, use_thoughts: bool = True,
                    write_thought: bool = True, conversation_id: int | str | None = None,
                    llm: ChatModel | None = None) -> Iterator[AnswerSources | QueuePosition | str | AskResult]:
        """One personalised turn, as the Chat tab and ``python -m copilot ask`` run it: refused when the line for
        the model is full; embed the message once (memories, then sources), personalise with the persona and
        recalled memories, ask for the answer in the user's language (:meth:`answer_language`; by default the
        question's), then :meth:`ask_stream` (its :class:`AnswerSources` carries the recalled memories too); once
        it is answered, keep what the user said about themselves and keep the turn in the user's conversation
        ``conversation_id`` (none: a new one, titled from this message; the :class:`AskResult` names it). A
        follow-up in a conversation is searched for with its recent turns' subject (:mod:`copilot.followups`); it
        is answered as asked. ``llm``: the model that writes this answer instead of the instance's (see
        :meth:`Answerer.ask_stream`)."""
        message = check_question(message, self.settings)  # before anything reads it: an agent's call too
        if conversation_id not in (None, ""):
            conversation_id = self._conversation(conversation_id, user_id).id
        else:
            conversation_id = None
        if paper_ids:
            self.visible_paper_ids(user_id, paper_ids)  # only papers this user may see
        admit_answer(llm or self.llm, self.settings)
        vector = self.embedder.encode_query(message)
        about, memories = self.memories.about(user_id, message, vector)
        follow = self.follow_up(user_id, conversation_id, message)
        for update in self.ask_stream(message, user_id=user_id, paper_ids=paper_ids, include_public=include_public,
                                      share_thought=share_thought, use_thoughts=use_thoughts,
                                      write_thought=write_thought, about_user=about, query_vector=vector,
                                      follow_up=follow, llm=llm,
                                      language=self.answer_language(user_id) or prompts.LANGUAGE_OF_QUESTION):
            if isinstance(update, AnswerSources):
                update.memories = memories
            elif isinstance(update, AskResult):
                self.memories.keep_statements(user_id, message)  # only from a message that was answered
                update.conversation_id = self._keep_turn(user_id, conversation_id, update)
            yield update

    def compare(self, user_id: str, paper_ids: list[str], aspects: list[str] | None = None, *,
                quotas: bool = False, address: str | None = None) -> Iterator[ComparisonCell | Comparison]:
        """A comparison table of ``paper_ids`` (2 to 10 the user may see) by ``aspects`` (default: task, data,
        method, metric, main result, limitation): each cell as it is filled, then the table
        (:mod:`copilot.tasks.compare`). Refused when the line for the model is full; with ``quotas``, its cells count
        against the user's daily allowance before any is filled, and a guest's also against its client ``address``'s
        (a fresh guest session is no fresh allowance)."""
        papers, chosen = check_request(paper_ids, aspects)
        self.visible_paper_ids(user_id, papers)
        admit_answer(self.llm, self.settings)
        cells = len(papers) * len(chosen)
        if quotas:
            admit_compare_cells(self.store, self.settings, user_id, cells, address)
        filled = 0
        try:
            for update in compare_stream(self, papers, chosen, user_id=user_id):
                filled += isinstance(update, ComparisonCell)
                yield update
        finally:  # the cells a failure (or a caller that stopped listening) left unfilled are given back
            if quotas and filled < cells:
                refund_compare_cells(self.store, user_id, cells - filled, address)

    def comparison(self, user_id: str, paper_ids: list[str], aspects: list[str] | None = None, *,
                   quotas: bool = False, address: str | None = None) -> Comparison:
        """The filled comparison table of :meth:`compare`, for a caller that does not show its cells as they come."""
        table = None
        for update in self.compare(user_id, paper_ids, aspects, quotas=quotas, address=address):
            if isinstance(update, Comparison):
                table = update
        assert table is not None
        return table

    def visitor_model(self, token: str) -> ChatModel | None:
        """``COPILOT_SIGNED_IN_MODEL`` on Hugging Face Inference under a signed-in visitor's own token, to pass to
        :meth:`chat_stream` (None when that setting is empty: the instance's model answers everyone)."""
        if not self.settings.signed_in_model or not token:
            return None
        from copilot.llm.hf_inference import HFInferenceModel

        return HFInferenceModel.for_visitor(self.settings, token)

    def follow_up(self, user_id: str, conversation_id: int | None, message: str) -> FollowUp | None:
        """How ``message`` is searched for after the recent turns of the user's conversation (None: as asked)."""
        turns_back = self.settings.follow_up_turns
        if conversation_id is None or turns_back == 0:
            return None
        previous = [t.question for t in self.store.conversations.turns(conversation_id, user_id, last=turns_back)]
        return followups.follow_up(message, previous)

    def _keep_turn(self, user_id: str, conversation_id: int | None, result: AskResult) -> int:
        """Append the answered turn to the conversation (a new one when there is none, or it was deleted
        meanwhile); returns the conversation's id."""
        conversations = self.store.conversations
        # Kept as the chat showed it: the marks of unsupported sentences, the evidence, or the decline.
        shown = result.to_markdown()
        if conversation_id is not None and conversations.add_turn(conversation_id, user_id, result.question,
                                                                  shown, result.query_id) is not None:
            return conversation_id
        title = title_from(result.question, self.settings.max_conversation_title_chars)
        return conversations.start(user_id, title, result.question, shown, result.query_id)

    # ----- kept conversations ------------------------------------------------------------------------

    def _conversation(self, conversation_id: int | str | None, user_id: str) -> Conversation:
        """The user's conversation; :class:`UserError` when none is chosen, :class:`NotFound` when it is not
        theirs (another user's id reads exactly as a missing one)."""
        if conversation_id is None or str(conversation_id).strip() == "":
            raise UserError("Choose a conversation first.")
        try:
            wanted = int(str(conversation_id).strip())
        except ValueError:
            raise NotFound(f"No conversation '{conversation_id}' of yours.") from None
        found = self.store.conversations.get(wanted, user_id)
        if found is None:
            raise NotFound(f"No conversation #{wanted} of yours.")
        return found

    def conversations(self, user_id: str) -> list[Conversation]:
        """The user's kept conversations, the one that last grew first."""
        return self.store.conversations.list(user_id)

    def open_conversation(self, conversation_id: int | str | None, user_id: str
                          ) -> tuple[Conversation, list[dict[str, Any]]]:
        """The user's conversation and its turns in order, each with its question, answer, answered query id,
        sources (read again: a removed paper's are marked so) and its thought's outcome."""
        conversation = self._conversation(conversation_id, user_id)
        turns = []
        for turn in self.store.conversations.turns(conversation.id, user_id):
            query = self.store.queries.get(turn.query_id, user_id) if turn.query_id is not None else None
            turns.append({"question": turn.question, "answer": turn.answer, "query_id": turn.query_id,
                          "created_at": turn.created_at,
                          "sources": sources_of(self.store, query.retrieved, user_id) if query else [],
                          "thought": {"outcome": query.thought_outcome if query else None,
                                      "thought_id": query.thought_id if query else None,
                                      "reason": query.thought_reason if query else None}})
        return conversation, turns

    def rename_conversation(self, conversation_id: int | str | None, title: str, user_id: str) -> Conversation:
        """Retitle the user's conversation (one line, at most ``COPILOT_MAX_CONVERSATION_TITLE_CHARS``)."""
        conversation = self._conversation(conversation_id, user_id)
        text = " ".join((title or "").split())
        limit = self.settings.max_conversation_title_chars
        if not text:
            raise UserError("Type a title first.")
        if len(text) > limit:
            raise UserError(f"A title is limited to {limit} characters (this one has {len(text)}).")
        self.store.conversations.rename(conversation.id, user_id, text)
        return self._conversation(conversation.id, user_id)

    def delete_conversation(self, conversation_id: int | str | None, user_id: str) -> None:
        """Delete the user's conversation and its turns (its answers' thoughts and feedback stay)."""
        conversation = self._conversation(conversation_id, user_id)
        if not self.store.conversations.delete(conversation.id, user_id):
            raise NotFound(f"No conversation #{conversation.id} of yours.")

    def export_conversation(self, conversation_id: int | str | None, user_id: str) -> tuple[Conversation, str]:
        """The user's conversation as Markdown: answers, their numbered references, each thought's outcome."""
        conversation, turns = self.open_conversation(conversation_id, user_id)
        return conversation, export_markdown(conversation, turns)

    def remember(self, text: str, *, user_id: str = DEFAULT_USER) -> int:
        """Keep something a user said about themselves (see :class:`copilot.memories.PersonalMemories`)."""
        return self.memories.remember(text, user_id=user_id)

    def recall(self, message: str, *, user_id: str = DEFAULT_USER, k: int = 5,
               query_vector: np.ndarray | None = None) -> list[dict[str, Any]]:
        """The user's memories that ``message`` calls for, by the association score when it is on."""
        return self.memories.recall(message, user_id=user_id, k=k, query_vector=query_vector)

    # ----- thoughts and answered questions ----------------------------------------------------------

    def thoughts(self, user_id: str) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self.memory.list(user_id)]

    def thought(self, thought_id: int, user_id: str) -> dict[str, Any]:
        """One of the user's thoughts (or a public one) with its provenance resolved to papers and thoughts."""
        found = self.memory.get(int(thought_id), user_id)
        if found is None:
            raise NotFound(f"No thought #{thought_id} for this user.")
        row = found.to_dict()
        row["provenance"] = [self._source(s["kind"], int(s["id"]), user_id) for s in row.pop("sources")]
        return row

    def _source(self, kind: str, source_id: int, user_id: str) -> dict[str, Any]:
        if kind == "thought":
            thought = self.store.thoughts.visible(source_id, user_id)
            if thought is None:
                return {"kind": "thought", "id": source_id, "text": "(deleted or not yours)"}
            return {"kind": "thought", "id": thought.id, "text": thought.text, "depth": thought.depth,
                    "confidence": thought.confidence}
        chunk = self.store.chunks.visible(source_id, user_id)
        if chunk is None:
            return {"kind": "chunk", "id": source_id, "text": "(removed from the library)"}
        return {"kind": "chunk", "id": chunk.id, "text": chunk.text, "paper_id": chunk.paper_id,
                "title": chunk.paper_title, "section": chunk.section, "page": chunk.page_start,
                "url": arxiv_url(chunk.paper_id)}

    def thought_origins(self, thought_ids: list[int]) -> dict[int, str]:
        """``thought id -> "from chunk #3, thought #7"`` for the thoughts in a retrieved list."""
        if not thought_ids:
            return {}
        edges = self.store.thoughts.sources_of(thought_ids)
        return {t: "from " + ", ".join(f"{s.kind} #{s.id}" for s in v) if v else "" for t, v in edges.items()}

    def delete_thought(self, thought_id: int, user_id: str) -> None:
        """Delete one of the user's thoughts (and the provenance pointing at it)."""
        if not self.memory.delete(int(thought_id), user_id):
            raise NotFound(f"No thought #{int(thought_id)} of yours.")

    def query(self, query_id: int, user_id: str) -> dict[str, Any]:
        """One of the user's answered questions with the thought it produced (outcome 'pending' until written)."""
        found = self.store.queries.get(int(query_id), user_id)
        if found is None:
            raise NotFound(f"No answer #{int(query_id)} for this user.")
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

    # ----- feedback and the self-evolution curve -------------------------------------------------------

    def feedback(self, query_id: int, value: int, *, user_id: str = DEFAULT_USER) -> dict[str, Any]:
        """Thumbs up (+1) or down (-1) on an answer; moves the confidence of the thought made from it."""
        if value not in (1, -1):
            raise UserError("feedback is +1 (up) or -1 (down)")
        query = self.store.queries.get(query_id, user_id)
        if query is None:
            raise NotFound(f"No answer #{query_id} for this user.")
        self.store.queries.add_feedback(query_id, user_id, value)
        confidence = self.memory.apply_feedback(query.thought_id, value) if query.thought_id is not None else None
        return {"query_id": query_id, "thought_id": query.thought_id, "confidence": confidence}

    def rate(self, query_id: int, value: int, user_id: str, wait_s: float) -> dict[str, Any]:
        """:meth:`feedback` once the answer's thought is written (or ``wait_s`` passed), so that it can move that
        thought's confidence; ``before`` is the confidence it had."""
        row = self.wait_for_thought(int(query_id), user_id, wait_s)
        found = self.memory.get(int(row["thought_id"]), user_id) if row["thought_id"] else None
        result = self.feedback(int(query_id), value, user_id=user_id)
        return result | {"before": found.confidence if found else None}

    def feedback_history(self, user_id: str) -> list[dict[str, Any]]:
        return [{"query_id": f.query_id, "value": f.value, "created_at": f.created_at}
                for f in self.store.queries.feedback(user_id)]

    def self_evolution(self, user_id: str) -> list[dict[str, Any]]:
        """Quality against memory size: the user's running share of helpful answers, and each stored evaluation
        run's headline score at the number of thoughts it used (rows: thoughts, quality, signal)."""
        created = [t["created_at"] for t in self.thoughts(user_id)]
        return self_evolution_curve(self.store, self.feedback_history(user_id), created)

    # ----- drafts, trends and the persona -------------------------------------------------------------

    def draft(self, kind: str, user_id: str, **kwargs: Any) -> Draft:  # noqa: ANN401 - the task's options
        """A draft of ``kind`` (abstract, synthesis, related), its LLM calls taking their turn among the user's. A
        related-work section's title and abstract together are bounded like a question."""
        if kind == "related":
            size = len(kwargs.get("title") or "") + len(kwargs.get("abstract") or "")
            limit = self.settings.max_question_chars
            if size > limit:
                raise LimitExceeded(f"The title and abstract are limited to {limit:,} characters together (these "
                                    f"have {size:,}): shorten the abstract.")
        wanted = [kwargs["paper_id"]] if kwargs.get("paper_id") else kwargs.get("paper_ids")
        if wanted:
            self.visible_paper_ids(user_id, list(wanted))  # only papers this user may see
        with scheduling(user_id):
            return getattr(writing, DRAFTS[kind])(self, user_id=user_id, **kwargs)

    def trends(self, user_id: str, paper_ids: list[str] | None) -> Trends:
        """Trend keywords and cited research ideas from the user's persona and papers (``paper_ids``: only
        these)."""
        with scheduling(user_id):
            return trends_and_ideas(self, user_id=user_id, persona=None, paper_ids=paper_ids or None)

    def profile(self, user_id: str) -> Profile | None:
        return self.store.profiles.get(user_id)

    def answer_language(self, user_id: str) -> str | None:
        """The language the user's answers and drafts are written in; None: the language of each question."""
        return language_for_prompt(self.store, user_id)

    def save_answer_language(self, user_id: str, language: str | None) -> str | None:
        """Keep the user's answer language (empty or "the language of the question": the default); returns it as
        saved."""
        return save_answer_language(self.store, user_id, language)

    def save_persona(self, user_id: str, persona: str, source: str) -> None:
        save_profile(self.store, user_id, persona, source)

    def persona_from_author(self, user_id: str, name: str) -> str:
        """Build and save a persona from an arXiv author's papers (an au: search)."""
        with scheduling(user_id):
            text = profile_from_author(self, name, user_id=user_id, arxiv_client=self.library.arxiv)
        save_profile(self.store, user_id, text, "arxiv:" + name)
        return text

    def persona_from_text(self, user_id: str, text: str) -> tuple[str, bool]:
        """Build and save a persona from pasted text about the user's research; whether the text was kept as written
        (short enough already) rather than summarised by the model."""
        with scheduling(user_id):
            persona = profile_from_text(self, text, user_id=user_id)
        save_profile(self.store, user_id, persona, "text")
        return persona, kept_as_written(text)
