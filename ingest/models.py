"""The data model of ingestion, used by every other module in ``ingest/``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Progress = Callable[[float, str], None]  # (fraction done in [0, 1], what is happening)


def no_progress(fraction: float, message: str) -> None:
    """Progress goes nowhere when the caller does not show it."""


def abs_url(arxiv_id: str | None) -> str | None:
    """The arXiv abstract page of a paper, or None for a paper not on arXiv."""
    return f"https://arxiv.org/abs/{arxiv_id}" if arxiv_id else None


@dataclass
class PaperMetadata:
    """What arXiv says about one paper."""

    arxiv_id: str  # without version, e.g. "2104.12255" or "hep-th/9901001"
    version: str | None  # e.g. "v1"; None when arXiv did not say
    title: str
    authors: list[str]
    abstract: str
    categories: list[str]
    primary_category: str
    published: str  # ISO 8601
    updated: str  # ISO 8601
    pdf_url: str
    doi: str | None = None
    journal_ref: str | None = None
    comment: str | None = None

    @property
    def versioned_id(self) -> str:
        return f"{self.arxiv_id}{self.version or ''}"


@dataclass
class Section:
    """One section of a parsed paper; its text is ``ParsedPaper.text[char_start:char_end]``."""

    title: str
    level: int  # 1 = top-level section, 2 = subsection, ...
    char_start: int
    char_end: int
    page_start: int  # 1-based
    page_end: int  # 1-based, inclusive


@dataclass(frozen=True)
class Note:
    """Text a reader finds beside the body's paragraphs: a footnote, the rows of a table (a table read cell by cell:
    Markdown rows under its caption and header; else cells joined by " | ", one row a line), or a figure's caption.
    Kept apart from ``ParsedPaper.text``, so the body reads as prose, and chunked on its own."""

    kind: str  # "footnote", "table" or "figure" (a caption, with the region of its figure)
    page: int  # 1-based
    text: str
    bbox: tuple[float, float, float, float] | None = None  # its region on the page (PDF points, top-left origin)
    whole: bool = False  # one source as it is (a table's rows under its caption and header), never split


@dataclass
class ParsedPaper:
    """A PDF turned into clean text with its structure."""

    title: str
    abstract: str
    text: str  # clean full text of the body, in reading order
    sections: list[Section]  # in reading order; covers the body text (not the abstract)
    references: list[str]  # one entry per reference
    n_pages: int
    page_offsets: list[int]  # page_offsets[i] = offset in ``text`` where page i+1 starts
    warnings: list[str] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)  # from the PDF's metadata, else its first page
    year: str = ""  # e.g. "2020": the PDF's creation date, else the first page; empty when unknown
    notes: list[Note] = field(default_factory=list)  # footnotes and tables, in page order

    def section_text(self, section: Section) -> str:
        return self.text[section.char_start : section.char_end]

    def page_at(self, offset: int) -> int:
        """The 1-based page holding character ``offset`` of ``text``."""
        page = 1
        for i, start in enumerate(self.page_offsets):
            if start <= offset:
                page = i + 1
            else:
                break
        return page


@dataclass(frozen=True)
class PaperChunk:
    """One retrievable piece of a parsed paper, with exactly where it comes from (for citations).

    The abstract's chunks index ``ParsedPaper.abstract`` (page 1), a note's chunks the note's text (its page);
    the others index ``ParsedPaper.text``.
    """

    paper_id: str
    seq: int  # 0-based position among the paper's chunks
    section: str
    text: str
    page_start: int  # 1-based
    page_end: int  # 1-based, inclusive
    char_start: int
    char_end: int
    n_tokens: int  # in the embedder's tokens
    bbox: tuple[float, float, float, float] | None = None  # a table's region on its page (PDF points)
