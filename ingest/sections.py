"""Which lines of a paper are section headings, with their numbers and levels.

Papers mark headings with emphasis (bold or a larger font) and, most of the time, a number ("1
Introduction", "2.1 Data", "A.2 Prompts" in appendices). Emphasis alone is not enough: author names,
table cells and run-in paragraph titles are bold too. So a line counts as a heading only when it is
emphasised *and* either carries a plausible next number, is one of the unnumbered headings every paper
uses (Abstract, References, Acknowledgments, ...), or is as large as the paper's own numbered headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Unnumbered headings papers use, by normalised title, with what they start.
_KNOWN: dict[str, str] = {
    "abstract": "abstract",
    "references": "references",
    "reference": "references",
    "bibliography": "references",
    "literature cited": "references",
    "works cited": "references",
    "appendix": "appendix",
    "appendices": "appendix",
    "supplementary material": "appendix",
    "supplementary materials": "appendix",
    "supplemental material": "appendix",
    # Front matter that follows the abstract: it ends the abstract but is not a section.
    "keywords": "front",
    "key words": "front",
    "index terms": "front",
    "ccs concepts": "front",
    "acm reference format": "front",
}
_KNOWN_SECTIONS = {
    "introduction",
    "background",
    "related work",
    "related works",
    "preliminaries",
    "method",
    "methods",
    "methodology",
    "materials and methods",
    "experiments",
    "experimental setup",
    "results",
    "evaluation",
    "analysis",
    "discussion",
    "results and discussion",
    "conclusion",
    "conclusions",
    "conclusion and future work",
    "conclusions and future work",
    "summary",
    "future work",
    "limitations",
    "limitation",
    "ethics statement",
    "ethical considerations",
    "ethical statement",
    "ethics",
    "broader impact",
    "broader impacts",
    "broader impact statement",
    "impact statement",
    "acknowledgments",
    "acknowledgements",
    "acknowledgment",
    "acknowledgement",
    "author contributions",
    "funding",
    "data availability",
    "code availability",
    "competing interests",
    "declaration of competing interest",
}

_NUMBERED = re.compile(r"^(?P<num>\d{1,2}(?:\.\d{1,2}){0,3})\.?\s+(?P<title>\S.{0,160})$")
_LETTERED = re.compile(r"^(?P<num>[A-Z](?:\.\d{1,2}){0,3})\.?\s+(?P<title>\S.{0,160})$")
_APPENDIX = re.compile(r"^appendix\s+(?P<num>[A-Z](?:\.\d{1,2}){0,3})\b[\s:.\-\u2013\u2014]*(?P<title>.*)$", re.I)
_ROMAN = re.compile(r"^(?P<num>[IVX]{1,5})\.\s+(?P<title>[A-Z].{0,160})$")
_LEADING_NUMBER = re.compile(r"^(?:\d{1,2}(?:\.\d{1,2})*|[A-Z](?:\.\d{1,2})+|[IVX]{1,5}\.)\.?\s+")


@dataclass(frozen=True)
class Heading:
    """A detected heading: its title without numbering, its number parts, its level and its kind."""

    title: str
    number: tuple[str, ...]  # ("2", "1") for "2.1", ("A",) for an appendix, () when unnumbered
    level: int  # 1 = section, 2 = subsection, ...
    kind: str  # "section", "abstract", "references", "appendix" or "front" (keywords and the like)

    @property
    def label(self) -> str:
        """The heading as printed: number and title."""
        return f"{'.'.join(self.number)} {self.title}".strip()


def normalise_heading(text: str) -> str:
    """Lowercase, without leading numbering or punctuation: how two spellings of a heading compare equal."""
    text = _LEADING_NUMBER.sub("", text.strip())
    text = re.sub(r"[^0-9a-z]+", " ", text.lower())
    return " ".join(text.split())


def known_kind(title: str) -> str | None:
    """The kind of an unnumbered heading every paper may use, or None when the title is not one of them."""
    norm = normalise_heading(title)
    if norm in _KNOWN:
        return _KNOWN[norm]
    if norm in _KNOWN_SECTIONS:
        return "section"
    return None


def looks_like_title(title: str, *, max_words: int = 16) -> bool:
    """Whether text reads like a heading rather than a sentence, a table cell or a formula."""
    words = title.split()
    if not words or len(words) > max_words or len(title) > 160:
        return False
    if not title[0].isalpha() or not any(c.isupper() for c in title):
        return False
    letters = sum(c.isalpha() for c in title)
    if letters < 3 or letters < 0.5 * len(title.replace(" ", "")):
        return False
    # A heading does not end like a sentence or a clause; run-in paragraph titles ("Results.") do.
    return not title.endswith((".", ",", ";")) or title.endswith("etc.")


def _as_ints(number: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else ord(p.upper()) - ord("A") + 1 for p in number)


def plausible_successor(previous: tuple[int, ...], new: tuple[int, ...], *, max_jump: int = 2) -> bool:
    """Whether ``new`` may follow ``previous`` in a paper's numbering, skipping at most ``max_jump - 1``.

    This rejects bold numbers that are not headings (table rows, list items, years) while tolerating a
    heading the detector missed.
    """
    if new <= previous or new[0] - previous[0] > max_jump:
        return False
    parent = new[:-1]
    if previous[: len(parent)] == parent:
        before = previous[len(parent)] if len(previous) > len(parent) else 0
    else:
        before = 0
    return new[-1] - before <= max_jump


class HeadingDetector:
    """Classifies lines in reading order, keeping the numbering seen so far to judge the next number.

    ``body_size`` is the font size of running text; ``section_size`` the size of the paper's first-level
    headings (its numbered ones when it has them). Lettered numbers ("A", "B.2") are accepted only once
    the appendix may have started: after the references or an "Appendix" heading.
    """

    def __init__(self, body_size: float, section_size: float) -> None:
        self.body_size = body_size
        self.section_size = section_size
        self.last_number: tuple[int, ...] = (0,)
        self.last_letter: tuple[int, ...] = (0,)
        self.in_appendix = False
        self.allow_generic = False

    def emphasised(self, size: float, bold: bool) -> bool:
        """Bold, or clearly larger than running text."""
        return bold or size >= self.body_size + 0.8

    def classify(self, text: str, *, size: float, bold: bool, generic: bool = True) -> Heading | None:
        """The heading this line is, or None. ``generic=False`` leaves out headings recognised by size
        alone, to tell whether a line is a new heading or the second line of a long one."""
        text = " ".join(text.split())
        if not text or not self.emphasised(size, bold) or size < self.body_size - 0.6:
            return None
        return (
            self._numbered(text, size)
            or self._appendix(text, size)
            or self._known(text)
            or (self._generic(text, size=size, bold=bold) if generic else None)
        )

    def accept(self, heading: Heading) -> None:
        """Record a heading that was used, so that the next numbers are judged against it."""
        if heading.kind == "references" or heading.kind == "appendix":
            self.in_appendix = True
        if heading.number and heading.number[0].isdigit():
            self.last_number = _as_ints(heading.number)
        elif heading.number:
            self.last_letter = _as_ints(heading.number)
            self.in_appendix = True

    def _top_level_size(self, number: tuple[str, ...], size: float) -> bool:
        """A first-level number needs the size of first-level headings: a bold list item does not have it."""
        return len(number) > 1 or size >= self.section_size - 0.5

    def _numbered(self, text: str, size: float) -> Heading | None:
        m = _NUMBERED.match(text)
        if not m or not looks_like_title(m["title"]):
            return None
        number = tuple(m["num"].split("."))
        if not self._top_level_size(number, size) or not plausible_successor(self.last_number, _as_ints(number)):
            return None
        kind = known_kind(m["title"]) or "section"
        return Heading(m["title"], number, len(number), "section" if kind == "abstract" else kind)

    def _appendix(self, text: str, size: float) -> Heading | None:
        m = _APPENDIX.match(text)
        if m:
            number = tuple(m["num"].split("."))
            return Heading(text, number, len(number), "appendix")
        if not self.in_appendix:
            return None
        m = _LETTERED.match(text)
        if not m or not looks_like_title(m["title"]):
            return None
        number = tuple(m["num"].split("."))
        if not self._top_level_size(number, size) or not plausible_successor(self.last_letter, _as_ints(number)):
            return None
        return Heading(m["title"], number, len(number), "appendix")

    def _known(self, text: str) -> Heading | None:
        title = text.rstrip(":.").strip()
        m = _ROMAN.match(title)
        if m:
            title = m["title"]
        elif _LEADING_NUMBER.match(title):
            return None  # numbered, but not the next number: not a heading here
        kind = known_kind(title)
        if kind is None:
            return None
        return Heading(title, (), 1, kind)

    def _generic(self, text: str, *, size: float, bold: bool) -> Heading | None:
        if not self.allow_generic or not bold or not looks_like_title(text, max_words=12):
            return None
        if size >= self.section_size - 0.3:
            return Heading(text, (), 1, "appendix" if self.in_appendix else "section")
        if size >= self.body_size + 0.5:
            return Heading(text, (), 2, "section")
        return None


def first_level_size(candidates: list[tuple[str, float, bool]], body_size: float) -> float:
    """The font size of first-level headings, from (text, size, bold) of every line of a paper.

    Numbered top-level headings ("3 Method") decide; without them, the known unnumbered ones
    ("Introduction", "References"); without either, a size a little above running text.
    """
    numbered: dict[float, int] = {}
    known: dict[float, int] = {}
    for text, size, bold in candidates:
        if not (bold or size >= body_size + 0.8) or size < body_size - 0.6:
            continue
        text = " ".join(text.split())
        m = _NUMBERED.match(text)
        if m and "." not in m["num"] and looks_like_title(m["title"]):
            numbered[round(size, 1)] = numbered.get(round(size, 1), 0) + 1
        elif known_kind(text.rstrip(":.")) in ("section", "references"):
            known[round(size, 1)] = known.get(round(size, 1), 0) + 1
    for counts in (numbered, known):
        if counts:
            return max(counts, key=lambda s: (counts[s], s))
    return body_size + 1.0
