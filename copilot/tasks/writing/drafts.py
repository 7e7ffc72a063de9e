"""The three drafts: a paper's abstract from its body, a synthesis of several papers, and a related-work section
for the user's own paper. Each is one LLM call over numbered sources, its citations checked against them."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from copilot import grounding, prompts
from copilot.tasks.writing.citations import citation_from_paper, cite_mentions, resolve_citations, year_of
from copilot.tasks.writing.generation import generate
from copilot.tasks.writing.model import Citation, Draft, DraftError, OnText
from copilot.tasks.writing.sources import (
    arxiv_results,
    body_chunks,
    related_by_paper,
    scrub_sentences,
    select_excerpts,
    truncate_tokens,
    visible_paper,
)
from copilot.types import Paper, RetrievedItem

if TYPE_CHECKING:
    from copilot.engine import Copilot
    from ingest.arxiv_client import ArxivClient

MAX_RELATED_PAPERS = 6
MAX_SOURCE_TOKENS = 250  # per numbered source: a tiny model reads short sources better
MIN_SYNTHESIS_PAPERS = 2
SYNTHESIS_NEEDS_PAPERS = "Choose at least two different papers to write a synthesis of."
RELATED_NEEDS_TITLE_OR_ABSTRACT = "Give your paper's title or abstract to write its related work."


def _ms(start: float) -> float:
    return round(1000 * (time.perf_counter() - start), 1)


def _finish(kind: str, title: str, reply: str, calls: int, sources: list[Citation], timings: dict[str, float],
            notes: list[str], *, cite: bool = True, copilot: Copilot | None = None, texts: Sequence[str] = ()
            ) -> Draft:
    """Build the draft: citations checked against the sources, links the sources do not hold unlinked, every
    sentence checked against the texts the model was given (``texts``, with ``copilot``'s embedder), and honest
    notes when they do not add up."""
    reply, unlinked = unlink(reply, texts)
    if unlinked:
        notes.append(f"Removed {unlinked} link(s) that none of the sources holds.")
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
    checked = None
    if copilot is not None and text and texts:
        items = [RetrievedItem("chunk", n, t, 0.0) for n, t in enumerate(texts, start=1)]
        t_check = time.perf_counter()
        checked = grounding.check(text, items, copilot.embedder, copilot.settings.grounding_threshold,
                                  heads=[s.title for s in sources])
        timings["grounding_ms"] = _ms(t_check)
        if checked.unsupported:
            notes.append(f"{len(checked.unsupported)} of {len(checked.sentences)} sentences (marked ⚠️) are not "
                         "supported by the sources.")
    return Draft(kind=kind, text=text, citations=cited, timings=timings, llm_calls=calls,
                 paper_ids=[s.paper_id for s in sources], sources=sources, notes=notes, title=title, checked=checked)


_LINK = re.compile(r"(?:https?://|www\.)[^\s<>()\[\]]+[^\s<>()\[\].,;:!?'\"]|\bdoi:\s*10\.\d{4,9}/\S+[^\s.,;:)]"
                   r"|\b10\.\d{4,9}/[^\s<>()]+[^\s<>().,;:]", re.IGNORECASE)


def unlink(text: str, sources: Sequence[str]) -> tuple[str, int]:
    """``text`` with every URL and DOI that none of ``sources`` holds removed (an invented link is never shown),
    and how many were removed."""
    held = " ".join(sources).casefold()
    removed = 0

    def drop(match: re.Match) -> str:
        nonlocal removed
        if match.group(0).casefold() in held:
            return match.group(0)
        removed += 1
        return "(link removed: not in the sources)"

    return _LINK.sub(drop, text), removed


def draft_abstract(copilot: Copilot, paper_id: str, *, user_id: str, on_text: OnText | None = None) -> Draft:
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
    reply, calls = generate(copilot, prompts.DRAFT_ABSTRACT_SYSTEM,
                            prompts.abstract_user(title, [f"({c.section}) {c.text}" for c in excerpts],
                                                  language=copilot.answer_language(user_id)),
                            on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    return _finish("abstract", title, reply, calls, [citation_from_paper(1, paper)], timings, [], cite=False,
                   copilot=copilot, texts=[c.text for c in excerpts])


def _paper_summary(copilot: Copilot, paper: Paper, budget: int) -> str:
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


def draft_synthesis(copilot: Copilot, paper_ids: list[str], *, user_id: str,
                    on_text: OnText | None = None) -> Draft:
    """One paragraph over several papers (at least :data:`MIN_SYNTHESIS_PAPERS` different ones), saying what they
    share and how they differ, citing them [n]."""
    start = time.perf_counter()
    wanted = _unique(paper_ids)
    if len(wanted) < MIN_SYNTHESIS_PAPERS:
        raise DraftError(SYNTHESIS_NEEDS_PAPERS)
    # Each paper once, in the order first named: two references (an id and an arXiv URL) may name one paper.
    papers = list({p.id: p for p in (visible_paper(copilot, ref, user_id) for ref in wanted)}.values())
    if len(papers) < MIN_SYNTHESIS_PAPERS:
        raise DraftError(SYNTHESIS_NEEDS_PAPERS)
    budget = max(60, min(MAX_SOURCE_TOKENS, copilot.settings.context_budget_tokens // len(papers)))
    sources = [citation_from_paper(i, p) for i, p in enumerate(papers, start=1)]
    texts = [_paper_summary(copilot, p, budget) for p in papers]
    timings = {"select_ms": _ms(start)}
    t1 = time.perf_counter()
    reply, calls = generate(copilot, prompts.DRAFT_SYNTHESIS_SYSTEM,
                            prompts.synthesis_user(texts, language=copilot.answer_language(user_id)), on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    title = "; ".join(s.title for s in sources)
    return _finish("synthesis", title if len(title) <= 120 else title[:117] + "…", reply, calls, sources, timings, [],
                   copilot=copilot, texts=texts)


def draft_related_work(copilot: Copilot, title: str, abstract: str, *, user_id: str,
                       paper_ids: list[str] | None = None, search_arxiv: bool = False,
                       arxiv_client: ArxivClient | None = None, on_text: OnText | None = None) -> Draft:
    """A related-work section for the user's own title and abstract, citing library papers (and, when asked and
    reachable, arXiv search results) as [n].

    Library chunks are retrieved by the title and abstract, grouped by paper, and the papers numbered by
    their best match. arXiv failures never fail the draft: it is written from the library with a note.
    """
    start = time.perf_counter()
    title, abstract = " ".join((title or "").split()), " ".join((abstract or "").split())
    if not title and not abstract:
        raise DraftError(RELATED_NEEDS_TITLE_OR_ABSTRACT)
    visible = copilot.visible_paper_ids(user_id, None)
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
        found, note = arxiv_results(arxiv_client, title, abstract, set(visible))
        if note:
            notes.append(note)
        timings["arxiv_ms"] = _ms(t_arxiv)
    if not papers and not found:
        if not visible:
            raise DraftError("The library is empty: add papers first (`python -m copilot papers add ...`).")
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
    reply, calls = generate(copilot, prompts.DRAFT_RELATED_SYSTEM,
                            prompts.related_user(title, abstract, texts, language=copilot.answer_language(user_id)),
                            on_text=on_text)
    timings["draft_ms"] = _ms(t1)
    timings["total_ms"] = _ms(start)
    return _finish("related", title, reply, calls, sources, timings, notes, copilot=copilot, texts=texts)
