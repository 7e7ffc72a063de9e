"""Citations in a draft: a paper read as a :class:`Citation`, ``[n]`` markers renumbered and checked against the
numbered sources, author-year references no source backs removed, and papers named without their number cited."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict

from copilot.tasks.writing.model import Citation
from copilot.types import Paper
from ingest.models import abs_url

# "[1]", "[1, 3]", "[2-4]", "[1; 2]": up to two digits, so years like [2020] are left alone.
CITATION_MARKER = re.compile(r"\[(\d{1,2}(?:\s*(?:[,;]|[-–])\s*\d{1,2})*)\]")
# "(Cohan et al., 2020)", "[Lo and Wang, 2020; Beltagy, 2019]", "(e.g., Berger et al.)": references by name that
# no numbered source backs.
_NAME = r"[A-Z][\w'’\-]+"
AUTHOR_YEAR = re.compile(rf"\s?[\[(]\s*(?:e\.g\.,?\s*)?{_NAME}(?:\s+(?:et\s+al\.?|and\s+{_NAME}|&\s+{_NAME}))?,?"
                         r"\s+(?:19|20)\d{2}[a-z]?(?:\s*;\s*[^\[\]()]{1,60}?(?:19|20)\d{2}[a-z]?)*\s*[\])]"
                         rf"|\s?[\[(]\s*(?:e\.g\.,?\s*)?{_NAME}\s+et\s+al\.?\s*[\])]")


def author_line(authors: list[str]) -> str:
    """"A", "A and B", or "A, B et al." — how a reference list names the authors."""
    if len(authors) <= 2:
        return " and ".join(authors)
    return f"{authors[0]}, {authors[1]} et al."


def year_of(published: str | None) -> int | None:
    match = re.match(r"(\d{4})", published or "")
    return int(match.group(1)) if match else None


def citation_from_paper(n: int, paper: Paper, *, origin: str = "library") -> Citation:
    """A citation for a paper of the library (or an arXiv search result read as one)."""
    authors = [str(a) for a in paper.authors]
    arxiv_id = paper.arxiv_id or None
    doi = paper.doi or None
    url = abs_url(arxiv_id) or (f"https://doi.org/{doi}" if doi else None)
    return Citation(n=n, paper_id=paper.id, title=" ".join((paper.title or paper.id).split()),
                    authors=author_line(authors), year=year_of(paper.published), url=url, author_list=authors,
                    arxiv_id=arxiv_id, doi=doi, venue=paper.journal_ref or None,
                    category=paper.meta.get("primary_category") or None, origin=origin)


def citation_numbers(group: str) -> list[int]:
    """The numbers inside one citation marker: "1, 3" -> [1, 3]; "2-4" -> [2, 3, 4]."""
    found: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        bounds = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
        if len(bounds) == 2 and bounds[0] <= bounds[1] <= bounds[0] + 10:
            found += list(range(bounds[0], bounds[1] + 1))
        else:
            found += bounds
    return found


def resolve_citations(text: str, sources: Sequence[Citation]) -> tuple[str, list[Citation], list[str]]:
    """Renumber ``[n]`` markers by first appearance; drop markers naming no source and author-year citations.

    Returns the new text, the cited sources renumbered to match it, and the removed citations as written
    (``[7]`` when there were fewer sources, ``(Cohan et al., 2020)``: a name no numbered source backs).
    """
    order: list[int] = []
    removed = [m.group(0).strip() for m in AUTHOR_YEAR.finditer(text)]

    def replace(match: re.Match) -> str:
        valid = []
        for n in citation_numbers(match.group(1)):
            if 1 <= n <= len(sources):
                valid.append(n)
                if n not in order:
                    order.append(n)
            elif f"[{n}]" not in removed:
                removed.append(f"[{n}]")
        renumbered = sorted({order.index(n) + 1 for n in valid})
        return f"[{', '.join(map(str, renumbered))}]" if renumbered else ""

    text = CITATION_MARKER.sub(replace, AUTHOR_YEAR.sub("", text))
    text = re.sub(r"[ \t]+([.,;:])", r"\1", text)
    text = re.sub(r"[ \t]{2,}", " ", text).strip()
    cited = [Citation(**{**asdict(sources[n - 1]), "n": i}) for i, n in enumerate(order, start=1)]
    return text, cited, removed


def short_name(title: str) -> str | None:
    """A paper's short name when its title leads with one ("SPECTER: Document-level ..." -> "SPECTER")."""
    head, sep, _ = (title or "").partition(":")
    head = head.strip()
    if sep and 1 <= len(head.split()) <= 3 and re.search(r"[A-Z0-9]", head[1:]) and len(head) >= 3:
        return head
    return None


def cite_mentions(text: str, sources: Sequence[Citation]) -> str:
    """``text`` with ``[n]`` after the first mention of each source by its short name, where none follows yet.

    A small model often names a paper ("SPECTER learns ...") without its number; the name is a citation too.
    """
    for i, source in enumerate(sources, start=1):
        name = short_name(source.title)
        if not name:
            continue
        match = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])(?!\s*\[)", text, re.IGNORECASE)
        if match:
            text = f"{text[:match.end()]} [{i}]{text[match.end():]}"
    return text
