"""The engine's data model: what retrieval returns and what an answer cites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    recalled_by: str = "embedding"  # which score recalled it

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
