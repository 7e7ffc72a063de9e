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
