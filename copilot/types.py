"""The data model: the records the repositories of :mod:`copilot.storage` return, what retrieval returns and
what an answer cites.

Records are plain dataclasses, never rows: a SQLite row and a PostgreSQL row read back as the same object, and
JSON fields (authors, sections, timings, ...) arrive parsed. Turning a record into the dict a JSON or Gradio
output shows happens where that output is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

ItemKind = Literal["chunk", "thought"]


@dataclass
class RetrievedItem:
    """One retrieved piece of context: a paper chunk (depth 0) or a thought (depth >= 1)."""

    kind: ItemKind
    id: int
    text: str
    score: float  # cosine to the query
    depth: int = 0
    confidence: float | None = None  # thoughts only
    paper_id: str | None = None  # chunks only
    paper_title: str | None = None
    section: str | None = None
    page_start: int | None = None
    page_end: int | None = None
    n_tokens: int = 0
    recalled_by: str = "embedding"  # which score recalled it: embedding, association, or words (full text)

    @property
    def label(self) -> str:
        """How an answer's source list names this item."""
        if self.kind == "thought":
            return f"thought #{self.id} (depth {self.depth})"
        pages = f"p. {self.page_start}" if self.page_start == self.page_end else f"pp. {self.page_start}-{self.page_end}"
        return f"{self.paper_title or self.paper_id}, {self.section}, {pages}"


@dataclass
class PackedContext:
    """The items chosen for one answer, in citation order ([1] is ``items[0]``)."""

    items: list[RetrievedItem] = field(default_factory=list)
    tokens: int = 0
    candidates: int = 0
    skipped_duplicates: int = 0
    skipped_budget: int = 0


@dataclass
class AnswerSources:
    """The sources of an answer, known as soon as retrieval is done (before the model is free to answer)."""

    items: list[RetrievedItem]
    retrieve_ms: float = 0.0
    memories: list[dict[str, Any]] = field(default_factory=list)  # the asker's recalled memories (the chat's)


@dataclass(frozen=True)
class SentenceSupport:
    """How well one answer sentence is supported by the answer's sources (see :mod:`copilot.grounding`).

    ``start`` and ``end`` locate the sentence in the answer text, so a view can mark it where it stands.
    """

    sentence: str  # as the answer wrote it, citation markers included
    support: float  # 0..1, against the best-supporting source
    source_n: int | None  # that source's number in the answer's source list ([1] is 1); None without sources
    quote: str  # that source's sentence closest to this one
    start: int = 0
    end: int = 0
    # The sentence's checkable facts (numbers, names, acronym expansions, quoted terms) that no source sent holds:
    # a sentence with any is unsupported, whatever its score.
    missing: tuple[str, ...] = ()
    # Its facts that the model, writing the answer again from the same sources, never stated again (a guess it
    # does not repeat): a sentence with any is unsupported too.
    unstable: tuple[str, ...] = ()

    def supported(self, threshold: float) -> bool:
        return self.sourced(threshold) and not self.unstable

    def sourced(self, threshold: float) -> bool:
        """Its sources support it and state every fact in it, whether or not the model said them again: such a
        sentence is an answer, shown (marked ⚠️ when unstable), not declined."""
        return self.support >= threshold and not self.missing

    def flaws(self) -> str:
        """Its facts in doubt, in words ("" when none): those no source states, then those the model did not say
        again."""
        parts = ([f"not in the sources: {', '.join(self.missing)}"] if self.missing else []) + (
            [f"not said again when the model answered again: {', '.join(self.unstable)}"] if self.unstable else [])
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"sentence": self.sentence, "support": self.support, "source_n": self.source_n, "quote": self.quote,
                "missing": list(self.missing), "unstable": list(self.unstable)}


@dataclass(frozen=True)
class EvidenceQuote:
    """A verbatim source sentence that supports an answer sentence: where it stands (paper, section, page)."""

    n: int  # the source's number in the answer's source list
    quote: str
    paper_id: str | None
    page: int | None
    section: str | None = None
    paper_title: str | None = None
    kind: str = "chunk"
    item_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "quote": self.quote, "paper_id": self.paper_id, "page": self.page,
                "section": self.section}


@dataclass(frozen=True)
class GroundingEvidence:
    """The two pieces of evidence for each (answer sentence, source) pair that a support score is made of, and
    each pair's closest source sentence."""

    cosine: np.ndarray  # (sentences, sources): cosine to the source's closest sentence
    coverage: np.ndarray  # (sentences, sources): IDF-weighted share of the sentence's terms the source contains
    quotes: list[list[str]]  # quotes[i][j]: source j's sentence closest to sentence i


@dataclass(frozen=True)
class Grounding:
    """The grounding check of one answer: each sentence's support, and whether every sentence reaches the
    threshold (an answer with no sentence is not grounded: nothing in it was checked)."""

    sentences: list[SentenceSupport]
    grounded: bool
    threshold: float

    @property
    def unsupported(self) -> list[SentenceSupport]:
        """The sentences below the threshold or stating a fact no source holds, in answer order."""
        return [s for s in self.sentences if not s.supported(self.threshold)]

    def as_dict(self) -> dict[str, Any]:
        """What ``ask --json`` adds to an answer: the ``grounding`` list and the ``grounded`` verdict."""
        return {"grounding": [s.as_dict() for s in self.sentences], "grounded": self.grounded}


@dataclass(frozen=True)
class QueuePosition:
    """Where a waiting LLM call stands: calls served before it (running ones not included), calls running
    now, and an estimate of the wait in seconds from the running average of call durations."""

    ahead: int
    running: int
    estimate_s: float


@dataclass(frozen=True)
class VectorFilter:
    """Which vectors a search may return: metadata, never an id list.

    Every field is one term of a SQL ``WHERE`` beside the distance ordering (and one payload condition of a
    vector database). A row is in scope when its owner matches: it is ``owner``'s own, or has no owner and
    ``shared`` is set (the shared arXiv papers), or is in the opt-in public pool and ``public`` is set. With no
    owner, ``shared`` or ``public`` at all, ownership does not restrict. The other fields narrow further.
    """

    owner: str | None = None
    shared: bool = False  # rows with no owner: chunks of shared arXiv papers
    public: bool = False  # rows in the opt-in public pool: public thoughts
    papers: frozenset[str] | None = None  # only chunks of these papers
    min_confidence: float | None = None  # thoughts at least this confident
    unflagged: bool = False  # leave out thoughts flagged because a source went away

    @property
    def scoped_by_owner(self) -> bool:
        return self.owner is not None or self.shared or self.public


@dataclass(frozen=True)
class VectorMeta:
    """The filterable metadata of one stored vector: what a :class:`VectorFilter` is evaluated against."""

    owner: str | None = None
    paper: str | None = None
    public: bool = False
    confidence: float | None = None
    flagged: bool = False


# ----- papers and their chunks -------------------------------------------------------------------------


@dataclass
class Paper:
    """One paper of the library with everything parsing and arXiv told about it.

    ``user_id`` None marks a shared arXiv paper (everyone sees it); an upload belongs to its user. Fields are in
    the order the ``papers`` table holds them, so a paper shown as a dict reads as the table does.
    """

    id: str
    user_id: str | None = None
    source: str | None = None
    arxiv_id: str | None = None
    version: str | None = None
    title: str | None = None
    authors: list[str] = field(default_factory=list)
    abstract: str | None = None
    categories: list[str] = field(default_factory=list)
    published: str | None = None
    updated: str | None = None
    pdf_url: str | None = None
    doi: str | None = None
    journal_ref: str | None = None
    file_hash: str | None = None
    pdf_path: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # arXiv comment and primary category
    added_at: str | None = None
    n_pages: int | None = None
    sections: list[dict[str, Any]] = field(default_factory=list)  # title, level, pages, offsets
    warnings: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    n_chunks: int = 0

    @property
    def shared(self) -> bool:
        return self.user_id is None


@dataclass
class PaperSummary:
    """One line of the library listing: what a table of papers shows, without the parsed structure."""

    id: str
    title: str | None
    source: str | None
    arxiv_id: str | None
    version: str | None
    authors: list[str]
    published: str | None
    n_pages: int | None
    user_id: str | None
    added_at: str | None
    n_chunks: int

    @property
    def shared(self) -> bool:
        return self.user_id is None


@dataclass
class Chunk:
    """A retrievable piece of a paper: it keeps exactly where it comes from, for citations.

    Chunking makes it without ``id``; a chunk read back from storage has its ``id``, its ``vector`` when the
    read asked for it, and its paper's title when read with its paper.
    """

    paper_id: str
    seq: int
    section: str
    text: str
    page_start: int
    page_end: int
    char_start: int  # offset in ParsedPaper.text
    char_end: int
    n_tokens: int
    id: int | None = None
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    paper_title: str | None = None
    bbox: tuple[float, float, float, float] | None = None  # a table's region on its page (PDF points)


@dataclass
class Passage:
    """A cited chunk shown where it stands in its paper: the page(s) rendered with its words highlighted.

    ``pages`` are the pages shown (where its words were found; the stored pages when none were), ``highlights``
    the highlighted rectangles by page in PDF points, ``coverage`` the share of its words found on them.
    """

    chunk_id: int
    paper_id: str
    paper_title: str | None
    section: str
    text: str
    page_start: int  # as stored with the chunk
    page_end: int
    pages: list[int]
    png: bytes = field(repr=False)
    width: int
    height: int
    highlights: dict[int, list[tuple[float, float, float, float]]] = field(default_factory=dict)
    coverage: float = 0.0


# ----- thoughts and their provenance -------------------------------------------------------------------


@dataclass(frozen=True)
class ThoughtSource:
    """One provenance edge: a thought was built from this chunk or thought."""

    kind: ItemKind
    id: int


@dataclass
class Thought:
    """A distilled finding of one user (public ones are in the opt-in pool that everyone may retrieve)."""

    id: int
    user_id: str | None
    text: str
    confidence: float | None
    support: int | None
    depth: int | None
    public: bool
    flagged: bool  # a paper it was built from was removed
    created_at: str | None
    updated_at: str | None
    sources: list[ThoughtSource] | None = None  # read only when asked for
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The thought as JSON shows it: the table's columns (flags as 0/1), then its sources when read."""
        out: dict[str, Any] = {"id": self.id, "user_id": self.user_id, "text": self.text,
                               "confidence": self.confidence, "support": self.support, "depth": self.depth,
                               "public": int(self.public), "flagged": int(self.flagged),
                               "created_at": self.created_at, "updated_at": self.updated_at}
        if self.sources is not None:
            out["sources"] = [{"kind": s.kind, "id": s.id} for s in self.sources]
        return out


# ----- the user: memories, profile, questions, feedback, follows ---------------------------------------


@dataclass
class Memory:
    """Something a user said about themselves, kept to personalise answers; only they ever see it."""

    id: int
    user_id: str
    text: str
    created_at: str | None


@dataclass
class Profile:
    """A user's research persona and where it came from (typed, pasted text, an arXiv author)."""

    user_id: str
    persona: str
    source: str | None
    updated_at: str | None
    answer_language: str | None = None  # the language answers and drafts are written in; None: the question's


@dataclass
class AccessToken:
    """A personal access token an agent (an MCP client) acts as its user with; only its hash is kept."""

    id: int
    user_id: str
    name: str
    created_at: str
    last_used_at: str | None = None


@dataclass
class Query:
    """One answered question, what was retrieved for it and what became of its thought."""

    id: int
    user_id: str
    text: str
    answer: str | None
    retrieved: list[dict[str, Any]]
    thought_id: int | None
    thought_outcome: str | None  # "pending" until the background worker has written the thought
    thought_reason: str | None
    timings: dict[str, float]
    llm_calls: int | None
    created_at: str | None
    thought_public: int | None = None  # the thought goes to the public pool
    thought_claim: str | None = None  # the worker writing the thought, while it is pending
    thought_claimed_at: float | None = None  # when that worker last renewed its claim (seconds since the epoch)


@dataclass
class ThoughtJob:
    """Writing the thought of one answered query: everything the thought needs, read back from the query's row,
    so any replica can do it."""

    query_id: int
    user_id: str
    question: str
    answer: str
    retrieved: list[dict[str, Any]]  # the sources the answer was built from, in their order
    public: bool
    timings: dict[str, float]
    created_at: str | None


@dataclass
class Feedback:
    """A thumbs up (+1) or down (-1) on an answer."""

    id: int
    query_id: int
    user_id: str
    value: int
    created_at: str | None


@dataclass
class Refresh:
    """One recorded library refresh: the categories asked for, papers added, papers skipped, failures."""

    id: int
    user_id: str | None  # None: the scheduled refresh, for everyone
    categories: list[str]
    added: list[str]
    skipped: int
    errors: list[str]
    started_at: str | None
    finished_at: str | None

    @property
    def n_added(self) -> int:
        return len(self.added)


@dataclass
class EvalRun:
    """One task of one stored evaluation run; ``report`` is that task's summary."""

    id: int
    task: str
    methods: list[str]
    started_at: str | None
    finished_at: str | None
    path: str | None
    report: dict[str, Any]


ImportStatus = Literal["added", "already in the library", "not found", "DOI only", "file to upload", "failed"]


@dataclass
class ImportedEntry:
    """What importing one bibliography entry did (:meth:`copilot.engine.Copilot.import_bibtex`).

    ``status`` is one of :data:`ImportStatus`; ``paper_id`` is the stored paper for an entry added from arXiv or
    found already there; ``detail`` says the rest in words (the DOI, the file to upload, why it failed).
    """

    key: str
    title: str
    status: ImportStatus
    paper_id: str | None = None
    arxiv_id: str | None = None
    doi: str | None = None
    files: list[str] = field(default_factory=list)
    detail: str = ""


@dataclass
class Conversation:
    """One kept chat of a user: its title, when it began and when it last grew, and how many turns it has."""

    id: int
    user_id: str
    title: str
    created_at: str | None
    updated_at: str | None
    n_turns: int = 0


@dataclass
class ConversationTurn:
    """One question of a conversation and the answer it got; ``query_id`` is the answered query, which holds the
    answer's sources and what became of its thought."""

    id: int
    conversation_id: int
    question: str
    answer: str
    query_id: int | None
    created_at: str | None


@dataclass
class ComparisonCell:
    """One cell of a comparison table: what one paper states for one aspect, with the sentence that shows it, or
    "not stated". ``supported``: every sentence of the cell passed the check that answers pass and the model wrote
    none of its facts unsure (an unsupported cell is shown marked); ``llm_calls``: 0 when nothing in the paper bore
    on the aspect."""

    paper_id: str
    aspect: str
    text: str
    stated: bool
    supported: bool = False
    evidence: list[EvidenceQuote] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # facts of the cell no source states
    unsure: list[str] = field(default_factory=list)  # facts of the cell the model wrote unsure (then unsupported)
    llm_calls: int = 0
    seconds: float = 0.0

    def shown(self) -> str:
        """The cell as a table shows it: its text with the evidence's page, marked ⚠️ when unsupported."""
        if not self.stated:
            return "not stated"
        page = f" (p. {self.evidence[0].page})" if self.evidence and self.evidence[0].page else ""
        return f"{'' if self.supported else '⚠️ '}{self.text}{page}"

    def as_dict(self) -> dict[str, Any]:
        return {"paper_id": self.paper_id, "aspect": self.aspect, "text": self.text if self.stated else "not stated",
                "stated": self.stated, "supported": self.supported, "missing": list(self.missing),
                "unsure": list(self.unsure), "evidence": [q.as_dict() for q in self.evidence],
                "llm_calls": self.llm_calls, "seconds": round(self.seconds, 2)}
