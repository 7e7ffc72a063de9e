"""What a draft is: the papers it cites (:class:`Citation`), the draft itself (:class:`Draft`) with its reference
list, Markdown and BibTeX, and the error a draft that cannot be written raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from copilot.errors import UserError
from copilot.tasks.writing.bibtex import bibtex_entries
from copilot.types import Grounding

OnText = Callable[[str], None]  # receives the draft text as it grows


class DraftError(UserError):
    """A draft cannot be written (unknown paper, empty library, nothing to write from); the message says why."""


@dataclass
class Citation:
    """One paper a draft cites (or was written from), with what a reference list and BibTeX need."""

    n: int
    paper_id: str
    title: str
    authors: str
    year: int | None
    url: str | None
    author_list: list[str] = field(default_factory=list)
    arxiv_id: str | None = None
    doi: str | None = None
    venue: str | None = None  # journal reference, when arXiv knows one
    category: str | None = None  # arXiv primary category
    origin: str = "library"  # "library" | "arxiv" (a search result that is not in the library)

    def reference(self) -> str:
        """One reference-list line (without its number)."""
        if self.authors and self.year:
            who = f"{self.authors} ({self.year}). "
        elif self.authors:
            who = f"{self.authors} " if self.authors.endswith(".") else f"{self.authors}. "
        else:
            who = f"({self.year}). " if self.year else ""
        where = f" {self.url}" if self.url else f" (library: {self.paper_id})"
        return f"{who}*{self.title}*.{where}"


@dataclass
class Draft:
    """A written draft with the papers it cites, the papers it was written from, and what it cost."""

    kind: str  # "abstract" | "synthesis" | "related"
    text: str
    citations: list[Citation]  # exactly the papers cited as [n] in ``text``, n as in the text
    timings: dict[str, float]
    llm_calls: int
    paper_ids: list[str]  # every paper given to the model, in prompt order
    sources: list[Citation] = field(default_factory=list)  # the same papers, numbered as in the prompt
    notes: list[str] = field(default_factory=list)  # what the reader should know (arXiv failed, nothing cited)
    title: str = ""
    checked: Grounding | None = None  # each sentence's support in the texts the model was given

    def marked_text(self) -> str:
        """The text with each sentence the sources do not support marked ⚠️ where it stands."""
        if self.checked is None:
            return self.text
        out, cursor = [], 0
        for s in self.checked.sentences:
            weak = not s.supported(self.checked.threshold)
            out.append(self.text[cursor:s.end] + (" ⚠️" if weak else ""))
            cursor = s.end
        return "".join(out) + self.text[cursor:]

    def references_markdown(self) -> str:
        """The cited papers as ``[n]`` lines; when nothing is cited, the papers used, as bullets."""
        if self.citations:
            return "\n".join(f"[{c.n}] {c.reference()}" for c in self.citations)
        return "\n".join(f"- {c.reference()}" for c in self.sources)

    def bibtex(self) -> str:
        """BibTeX entries of the cited papers (or of the papers used, when nothing is cited)."""
        return bibtex_entries(self.citations or self.sources)

    def to_markdown(self) -> str:
        heading = {"abstract": "Abstract", "synthesis": "Synthesis", "related": "Related Work"}.get(self.kind, "Draft")
        parts = [f"# {heading}: {self.title}" if self.title else f"# {heading}", self.marked_text().strip()]
        if self.citations:
            parts += ["## References", self.references_markdown()]
        elif self.sources:
            lead = ("Written from this paper." if self.kind == "abstract"
                    else "Written from these papers; the text cites none of them by number.")
            parts += ["## Sources", f"{lead}\n\n{self.references_markdown()}"]
        if self.notes:
            parts.append("\n>\n".join(f"> {note}" for note in self.notes))
        return "\n\n".join(parts) + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "text": self.text,
            "citations": [asdict(c) for c in self.citations],
            "sources": [asdict(c) for c in self.sources],
            "references": self.references_markdown(),
            "bibtex": self.bibtex(),
            "paper_ids": self.paper_ids,
            "notes": self.notes,
            "grounded": bool(self.checked and self.checked.grounded),
            "unsupported": [{"sentence": s.sentence, "support": s.support, "missing": list(s.missing),
                             "closest": s.quote} for s in (self.checked.unsupported if self.checked else [])],
            "timings": self.timings,
            "llm_calls": self.llm_calls,
        }
