"""Drafting with citations: a paper's abstract from its body, a synthesis of several papers, and a related-work
section for the user's own paper.

Every draft is one LLM call over numbered sources, capped at :data:`DRAFT_MAX_TOKENS`. A small model cites
badly, so the reply is post-processed rather than trusted: citation markers are renumbered by first
appearance, markers naming no source are removed, and the citation list holds exactly the papers the text
cites. When the text cites nothing, the papers it was written from are listed as *sources*, never passed off
as citations. Users draft only over papers they may see (public arXiv papers and their own uploads).
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from copilot.errors import UserError
from copilot import writing_prompts as wp
from copilot.engine import stream_until_repeating
from copilot.retrieval import chunk_items
from copilot.storage import Store
from copilot.types import Chunk, Paper, RetrievedItem, VectorFilter
from ingest.models import abs_url

DRAFT_MAX_TOKENS = 300
MAX_RELATED_PAPERS = 6
MAX_ARXIV_RESULTS = 3
MAX_SOURCE_TOKENS = 250  # per numbered source: a tiny model reads short sources better
RELATED_MIN_SCORE = 0.2  # cosine of a paper's best chunk to the user's title and abstract
# Sections that say nothing about the paper's own content (or are the abstract itself).
_SKIPPED_SECTION = re.compile(r"^\s*(abstract|references?|bibliography|acknowledge?ments?|ethic|funding|appendix)",
                              re.IGNORECASE)
_END_OF_BODY = re.compile(r"^\s*(references?|bibliography)\s*$", re.IGNORECASE)
_KEY_SECTION = re.compile(r"introduction|conclusion|result|method|approach|model|experiment|evaluation|discussion",
                          re.IGNORECASE)
# "[1]", "[1, 3]", "[2-4]", "[1; 2]": up to two digits, so years like [2020] are left alone.
CITATION_MARKER = re.compile(r"\[(\d{1,2}(?:\s*(?:[,;]|[-–])\s*\d{1,2})*)\]")
# "(Cohan et al., 2020)", "[Lo and Wang, 2020; Beltagy, 2019]", "(e.g., Berger et al.)": references by name that
# no numbered source backs.
_NAME = r"[A-Z][\w'’\-]+"
AUTHOR_YEAR = re.compile(rf"\s?[\[(]\s*(?:e\.g\.,?\s*)?{_NAME}(?:\s+(?:et\s+al\.?|and\s+{_NAME}|&\s+{_NAME}))?,?"
                         r"\s+(?:19|20)\d{2}[a-z]?(?:\s*;\s*[^\[\]()]{1,60}?(?:19|20)\d{2}[a-z]?)*\s*[\])]"
                         rf"|\s?[\[(]\s*(?:e\.g\.,?\s*)?{_NAME}\s+et\s+al\.?\s*[\])]")
_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)?(abstract|related work|synthesis|summary)\s*(?:\*\*)?\s*[:.]?\s*\n?",
                      re.IGNORECASE)

OnText = Callable[[str], None]  # receives the draft text as it grows


class DraftError(UserError):
    """A draft cannot be written (unknown paper, empty library, nothing to write from); the message says why."""


# ----- data model --------------------------------------------------------------------------------------


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
        parts = [f"# {heading}: {self.title}" if self.title else f"# {heading}", self.text.strip()]
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
            "timings": self.timings,
            "llm_calls": self.llm_calls,
        }


# ----- papers and citations ------------------------------------------------------------------------------


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


# ----- BibTeX ------------------------------------------------------------------------------------------

_BIB_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_KEY_STOPWORDS = {"a", "an", "the", "on", "of", "for", "in", "to", "and", "with", "towards", "toward", "from", "via"}


def bib_escape(text: str) -> str:
    """``text`` safe inside a braced BibTeX field: LaTeX specials escaped, so braces always balance."""
    return re.sub(r"[\\{}&%$#_~^]", lambda m: _BIB_SPECIAL[m.group(0)], " ".join(text.split()))


def bib_verbatim(text: str) -> str:
    """An identifier or URL as BibTeX reads it verbatim: only what would unbalance the braces is dropped."""
    return re.sub(r"[{}\\\s]", "", text)


def _ascii_word(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())


def bibtex_key(citation: Citation) -> str:
    """A key that depends only on the paper: first author's surname, year, first significant title word."""
    names = citation.author_list[0].split() if citation.author_list else []
    surname = _ascii_word(names[-1]) if names else ""
    words = [_ascii_word(w) for w in re.split(r"[\s:\-–]+", citation.title)]
    word = next((w for w in words if w and w not in _KEY_STOPWORDS), "") or _ascii_word(citation.paper_id)
    return f"{surname or 'anon'}{citation.year or ''}{word[:20]}"


def bibtex_entry(citation: Citation, key: str) -> str:
    fields: list[tuple[str, str]] = [("title", "{" + bib_escape(citation.title) + "}")]
    if citation.author_list:
        fields.append(("author", " and ".join(bib_escape(a) for a in citation.author_list)))
    if citation.year:
        fields.append(("year", str(citation.year)))
    kind = "article" if citation.venue else "misc"
    if citation.venue:
        fields.append(("journal", bib_escape(citation.venue)))
    if citation.doi:
        fields.append(("doi", bib_verbatim(citation.doi)))
    if citation.arxiv_id:
        fields += [("eprint", bib_verbatim(citation.arxiv_id)), ("archivePrefix", "arXiv")]
        if citation.category:
            fields.append(("primaryClass", bib_escape(citation.category)))
    if citation.url:
        fields.append(("url", bib_verbatim(citation.url)))
    if not citation.url and not citation.arxiv_id:
        fields.append(("note", bib_escape(f"Paper Copilot library: {citation.paper_id}")))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}\n}}"


def bibtex_entries(citations: Sequence[Citation]) -> str:
    """One entry per paper; keys made unique with a, b, c suffixes (in list order, so they are stable)."""
    used: dict[str, int] = {}
    entries = []
    for citation in citations:
        key = bibtex_key(citation)
        count = used.get(key, 0)
        used[key] = count + 1
        entries.append(bibtex_entry(citation, key if count == 0 else f"{key}{chr(ord('a') + count - 1)}"))
    return "\n\n".join(entries) + ("\n" if entries else "")


# ----- reading the library ---------------------------------------------------------------------------


def library_for(copilot):  # noqa: ANN001, ANN202 - an copilot.library.Library over the copilot's store
    from copilot.library import Library

    return Library.open(copilot.settings, store=copilot.store, embedder=copilot.embedder)


def visible_paper(copilot, paper_ref: str, user_id: str) -> Paper:  # noqa: ANN001
    """The paper for ``paper_ref`` if ``user_id`` may see it (arXiv papers are public, uploads are owned)."""
    from ingest.errors import IngestError

    try:
        return library_for(copilot).show(paper_ref.strip(), user_id=user_id)
    except IngestError:
        raise DraftError(f"No paper '{paper_ref}' in your library; `python -m ingest list` shows the ids.") from None


def visible_paper_ids(copilot, user_id: str) -> list[str]:  # noqa: ANN001
    return copilot.store.papers.visible_ids(user_id)


def body_chunks(store: Store, paper_id: str) -> list[Chunk]:
    """The paper's own content with its vectors: no abstract, and nothing from the reference list on
    (appendices follow it)."""
    kept = []
    for chunk in store.chunks.of_paper(paper_id, vectors=True):
        section = chunk.section or ""
        if _END_OF_BODY.match(section):
            break
        if not _SKIPPED_SECTION.match(section):
            kept.append(chunk)
    return kept


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i:i + n]) for i in range(max(0, len(words) - n + 1))}


def scrub_sentences(text: str, banned: str) -> str:
    """``text`` without the sentences that repeat ``banned`` (mostly the same 5-word runs)."""
    if not banned.strip():
        return text
    banned_shingles = _shingles(banned)
    banned_flat = " ".join(re.findall(r"[a-z0-9]+", banned.lower()))
    kept = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        shingles = _shingles(sentence)
        if shingles:
            copied = len(shingles & banned_shingles) / len(shingles) >= 0.5
        else:
            flat = " ".join(re.findall(r"[a-z0-9]+", sentence.lower()))
            copied = bool(flat) and len(flat) > 12 and flat in banned_flat
        if not copied:
            kept.append(sentence)
    return " ".join(kept).strip()


def truncate_tokens(text: str, budget: int, count_tokens: Callable[[str], int]) -> str:
    """``text`` cut at a word boundary to about ``budget`` tokens."""
    tokens = count_tokens(text)
    if tokens <= budget:
        return text
    words = text.split()
    keep = max(1, int(len(words) * budget / tokens * 0.95))
    return " ".join(words[:keep]) + " …"


def select_excerpts(chunks: list[Chunk], budget: int, count_tokens: Callable[[str], int]) -> list[Chunk]:
    """The chunks that best stand for the whole paper within ``budget`` tokens, in reading order.

    A chunk scores its cosine to the centroid of all body chunks (how central it is), plus a bonus for opening
    a section and a larger one for opening a key section (introduction, method, results, conclusion): where
    authors state what they did is where an abstract comes from.
    """
    if not chunks:
        return []
    vectors = np.stack([c.vector for c in chunks])
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid) or 1.0
    centrality = vectors @ centroid
    seen_sections: set[str] = set()
    scores = []
    for chunk, central in zip(chunks, centrality, strict=True):
        bonus = 0.0
        if chunk.section not in seen_sections:
            seen_sections.add(chunk.section)
            bonus = 0.3 if _KEY_SECTION.search(chunk.section or "") else 0.1
        scores.append(float(central) + bonus)
    chosen, used = [], 0
    for i in sorted(range(len(chunks)), key=lambda i: -scores[i]):
        tokens = count_tokens(chunks[i].text)
        if used + tokens <= budget:
            chosen.append(chunks[i])
            used += tokens
    return sorted(chosen, key=lambda c: c.seq)


# ----- the one LLM call --------------------------------------------------------------------------------


def finish_text(text: str) -> str:
    """The reply without a heading the model added, cut before a repeated paragraph and after its last complete
    sentence."""
    text = _HEADING.sub("", text.strip(), count=1).strip()
    paragraphs = [p.strip() for p in text.split("\n\n")]
    repeat = next((i for i, p in enumerate(paragraphs) if p and p in paragraphs[:i]), None)
    if repeat is not None:  # a small model that repeats a paragraph has nothing more to say
        text = "\n\n".join(paragraphs[:repeat]).strip()
    if text and text[-1] not in ".!?)]\"'" and re.search(r"[.!?]\s", text):
        ends = [m.end() for m in re.finditer(r"[.!?](?:\s*\[[\d,\s–-]+\])?(?=\s)", text)]
        if ends:
            text = text[:ends[-1]]
    return text.strip()


def generate(copilot, system: str, user: str, *, on_text: OnText | None = None,  # noqa: ANN001
             max_tokens: int = DRAFT_MAX_TOKENS, shots: Sequence[tuple[str, str]] = ()) -> tuple[str, int]:
    """One capped, streamed call; stops when the model starts repeating itself. Returns (text, LLM calls).

    ``shots`` are example (user, assistant) turns shown first: a small model copies a shown format far better
    than it follows a described one.
    """
    messages = [{"role": "system", "content": system}]
    for example, reply in shots:
        messages += [{"role": "user", "content": example}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": user})
    text = ""
    for text in stream_until_repeating(copilot.llm, messages, max_tokens=max_tokens,
                                       temperature=copilot.settings.temperature):
        if on_text is not None:
            on_text(text)
    return finish_text(text), 1


def _ms(start: float) -> float:
    return round(1000 * (time.perf_counter() - start), 1)


def _finish(kind: str, title: str, reply: str, calls: int, sources: list[Citation], timings: dict[str, float],
            notes: list[str], *, cite: bool = True) -> Draft:
    """Build the draft: citations checked against the sources, and honest notes when they do not add up."""
    if cite:
        # A number opening a line is the model copying the numbered source list: a label, often the wrong one.
        reply = re.sub(r"^[ \t]*\[\d{1,2}\][ \t]*", "", reply, flags=re.MULTILINE)
        text, cited, removed = resolve_citations(cite_mentions(reply, sources), sources)
        if removed:
            notes.append(f"Removed {len(removed)} citation(s) that name none of the {len(sources)} numbered "
                         f"sources: {', '.join(removed)}.")
        if not cited and text:
            notes.append("The model cited no source by number; the papers it was written from are listed as "
                         "sources instead.")
    else:
        text, cited, _ = resolve_citations(reply, [])  # an abstract of one paper cites nothing
    if not text:
        notes.append("The model wrote nothing usable; try again or configure a larger model.")
    return Draft(kind=kind, text=text, citations=cited, timings=timings, llm_calls=calls,
                 paper_ids=[s.paper_id for s in sources], sources=sources, notes=notes, title=title)


# ----- the three drafts --------------------------------------------------------------------------------


def draft_abstract(copilot, paper_id: str, *, user_id: str, on_text: OnText | None = None) -> Draft:  # noqa: ANN001
    """An abstract for one paper written from its body only.

    The stored abstract and the abstract section never reach the model, and body sentences that repeat the
    abstract are removed too, so the draft can be scored against the real abstract.
    """
    start = time.perf_counter()
    paper = visible_paper(copilot, paper_id, user_id)
    chunks = body_chunks(copilot.store, paper.id)
    if not chunks:
        raise DraftError(f"Paper '{paper.id}' has no body text to write an abstract from.")
    real_abstract = paper.abstract or ""
    abstract_chunks = " ".join(c.text for c in copilot.store.chunks.of_paper(paper.id) if c.section == "Abstract")
    banned = f"{real_abstract} {abstract_chunks}"
    chunks = [replace(c, text=scrub_sentences(c.text, banned)) for c in chunks]
    chunks = [c for c in chunks if len(c.text.split()) >= 8]
    excerpts = select_excerpts(chunks, copilot.settings.context_budget_tokens, copilot.llm.count_tokens)
    if not excerpts:
        raise DraftError(f"Paper '{paper.id}' has no body text to write an abstract from.")
    timings = {"select_ms": _ms(start)}
    t1 = time.perf_counter()
    title = paper.title or paper.id
    reply, calls = generate(copilot, wp.ABSTRACT_SYSTEM,
                            wp.abstract_user(title, [f"({c.section}) {c.text}" for c in excerpts]),
                            on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    return _finish("abstract", title, reply, calls, [citation_from_paper(1, paper)], timings, [], cite=False)


def _paper_summary(copilot, paper: Paper, budget: int) -> str:  # noqa: ANN001
    """How a paper is shown as one numbered source: title, year, then its abstract (or central body text)."""
    year = year_of(paper.published)
    head = f"{paper.title or paper.id}{f' ({year})' if year else ''}."
    text = paper.abstract or ""
    if not text:
        chunks = body_chunks(copilot.store, paper.id)
        text = " ".join(c.text for c in select_excerpts(chunks, budget, copilot.llm.count_tokens))
    return truncate_tokens(f"{head} {text}".strip(), budget, copilot.llm.count_tokens)


def _unique(ids: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for paper_id in ids:
        cleaned = paper_id.strip()
        if cleaned and cleaned not in seen:
            seen.append(cleaned)
    return seen


def draft_synthesis(copilot, paper_ids: list[str], *, user_id: str,  # noqa: ANN001
                    on_text: OnText | None = None) -> Draft:
    """One paragraph over several papers, saying what they share and how they differ, citing them [n]."""
    start = time.perf_counter()
    wanted = _unique(paper_ids)
    if not wanted:
        raise DraftError("Choose at least one paper to write a synthesis of.")
    papers = [visible_paper(copilot, ref, user_id) for ref in wanted]
    budget = max(60, min(MAX_SOURCE_TOKENS, copilot.settings.context_budget_tokens // len(papers)))
    sources = [citation_from_paper(i, p) for i, p in enumerate(papers, start=1)]
    texts = [_paper_summary(copilot, p, budget) for p in papers]
    timings = {"select_ms": _ms(start)}
    t1 = time.perf_counter()
    reply, calls = generate(copilot, wp.SYNTHESIS_SYSTEM, wp.synthesis_user(texts), on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    title = "; ".join(s.title for s in sources)
    return _finish("synthesis", title if len(title) <= 120 else title[:117] + "…", reply, calls, sources, timings, [])


def related_by_paper(copilot, query: str, paper_ids: list[str], *, per_paper: int = 2  # noqa: ANN001
                     ) -> dict[str, list[RetrievedItem]]:
    """For each paper of ``paper_ids`` that matches ``query``, its best content chunks; papers best first.

    One search over every chunk in scope (not a top-K over all papers), so a paper with many close chunks
    cannot crowd the others out: related work needs breadth. Papers scoring under :data:`RELATED_MIN_SCORE`
    are left out unless nothing scores higher.
    """
    sections = copilot.store.chunks.sections_of(paper_ids)
    paper_of = {i: paper for i, (paper, section) in sections.items() if not _SKIPPED_SECTION.match(section or "")}
    if not paper_of:
        return {}
    hits = [(i, score) for i, score in copilot.store.search(
        "chunks", copilot.embedder.encode_query(query), min(len(sections), 5000),
        VectorFilter(papers=frozenset(paper_ids)))
        if i in paper_of]
    best: dict[str, list[tuple[int, float]]] = {}
    for chunk_id, score in hits:  # best first; only the chunks kept are read from the store
        kept = best.setdefault(paper_of[chunk_id], [])
        if len(kept) < per_paper:
            kept.append((chunk_id, score))
    found = {item.id: item for item, _ in chunk_items(copilot.store, [h for kept in best.values() for h in kept])}
    by_paper = {pid: [found[chunk_id] for chunk_id, _ in kept] for pid, kept in best.items()}
    relevant = {pid: items for pid, items in by_paper.items() if items[0].score >= RELATED_MIN_SCORE}
    return relevant or dict(list(by_paper.items())[:1])


def _arxiv_sources(client, title: str, abstract: str, known: set[str]) -> list[Paper]:  # noqa: ANN001
    """arXiv search results for the user's paper that the library does not hold, read as papers."""
    query = title.strip() or " ".join(abstract.split()[:30])
    results = client.search(query, max_results=MAX_ARXIV_RESULTS + len(known))
    rows = []
    for m in results:
        if m.arxiv_id in known:
            continue
        rows.append(Paper(id=m.arxiv_id, arxiv_id=m.arxiv_id, title=m.title, authors=list(m.authors),
                          abstract=m.abstract, published=m.published, doi=m.doi, journal_ref=m.journal_ref,
                          meta={"primary_category": m.primary_category}))
    return rows[:MAX_ARXIV_RESULTS]


def draft_related_work(copilot, title: str, abstract: str, *, user_id: str,  # noqa: ANN001
                       paper_ids: list[str] | None = None, search_arxiv: bool = False,
                       arxiv_client=None, on_text: OnText | None = None) -> Draft:  # noqa: ANN001
    """A related-work section for the user's own title and abstract, citing library papers (and, when asked and
    reachable, arXiv search results) as [n].

    Library chunks are retrieved by the title and abstract, grouped by paper, and the papers numbered by
    their best match. arXiv failures never fail the draft: it is written from the library with a note.
    """
    start = time.perf_counter()
    title, abstract = " ".join((title or "").split()), " ".join((abstract or "").split())
    if not title and not abstract:
        raise DraftError("Give your paper's title or abstract to write its related work.")
    visible = visible_paper_ids(copilot, user_id)
    if paper_ids:
        scope = [visible_paper(copilot, ref, user_id).id for ref in _unique(paper_ids)]
    else:
        scope = visible
    notes: list[str] = []
    by_paper = related_by_paper(copilot, f"{title}. {abstract}", scope) if scope else {}
    timings = {"retrieve_ms": _ms(start)}
    papers = [visible_paper(copilot, pid, user_id) for pid in list(by_paper)[:MAX_RELATED_PAPERS]]

    found: list[Paper] = []
    if search_arxiv:
        t_arxiv = time.perf_counter()
        found, note = _search_arxiv(arxiv_client, title, abstract, set(visible))
        if note:
            notes.append(note)
        timings["arxiv_ms"] = _ms(t_arxiv)
    if not papers and not found:
        if not visible:
            raise DraftError("The library is empty: add papers first (`python -m ingest add ...`).")
        raise DraftError("No paper in the library matches this title and abstract.")

    n_sources = len(papers) + len(found)
    budget = max(60, min(MAX_SOURCE_TOKENS, copilot.settings.context_budget_tokens // n_sources))
    count = copilot.llm.count_tokens
    sources, texts = [], []
    for paper in papers:
        sources.append(citation_from_paper(len(sources) + 1, paper))
        lead = truncate_tokens(paper.abstract or "", budget // 2, count)
        excerpt = " ".join(i.text for i in by_paper[paper.id][:2])
        texts.append(truncate_tokens(f"{paper.title or paper.id}. {lead} {excerpt}".strip(), budget, count))
    for result in found:
        sources.append(citation_from_paper(len(sources) + 1, result, origin="arxiv"))
        texts.append(truncate_tokens(f"{result.title}. {result.abstract}", budget, count))

    t1 = time.perf_counter()
    reply, calls = generate(copilot, wp.RELATED_SYSTEM, wp.related_user(title, abstract, texts), on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    return _finish("related", title, reply, calls, sources, timings, notes)


def _search_arxiv(client, title: str, abstract: str,  # noqa: ANN001 - an ArxivClient, or None for a new one
                  known: set[str]) -> tuple[list[Paper], str | None]:
    """arXiv results, or none and a note saying why (offline, rate limited, nothing found)."""
    from ingest.errors import IngestError

    try:
        if client is None:
            from ingest.arxiv_client import ArxivClient

            client = ArxivClient(num_retries=1)
        rows = _arxiv_sources(client, title, abstract, known)
    except (IngestError, OSError) as exc:
        return [], f"arXiv search failed, so this draft uses the library only: {exc}"
    if not rows:
        return [], "arXiv search found no further papers; this draft uses the library only."
    return rows, None
