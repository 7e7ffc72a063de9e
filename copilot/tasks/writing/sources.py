"""What a draft is written from: the papers a user may see, their body text (never the abstract or the reference
list), the excerpts that best stand for a paper within a token budget, the library papers closest to the user's
own paper, and arXiv search results."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from copilot.retrieval import chunk_items
from copilot.storage import Store
from copilot.tasks.writing.model import DraftError
from copilot.types import Chunk, Paper, RetrievedItem, VectorFilter
from ingest.arxiv_client import ArxivClient
from ingest.errors import IngestError

if TYPE_CHECKING:
    from copilot.engine import Copilot

MAX_ARXIV_RESULTS = 3
RELATED_MIN_SCORE = 0.2  # cosine of a paper's best chunk to the user's title and abstract
# Sections that say nothing about the paper's own content (or are the abstract itself).
_SKIPPED_SECTION = re.compile(r"^\s*(abstract|references?|bibliography|acknowledge?ments?|ethic|funding|appendix)",
                              re.IGNORECASE)
_END_OF_BODY = re.compile(r"^\s*(references?|bibliography)\s*$", re.IGNORECASE)
_KEY_SECTION = re.compile(r"introduction|conclusion|result|method|approach|model|experiment|evaluation|discussion",
                          re.IGNORECASE)


def visible_paper(copilot: Copilot, paper_ref: str, user_id: str) -> Paper:
    """The paper for ``paper_ref`` if ``user_id`` may see it (arXiv papers are public, uploads are owned)."""
    try:
        return copilot.library.show(paper_ref.strip(), user_id=user_id)
    except IngestError:
        raise DraftError(f"No paper '{paper_ref}' in your library; `python -m copilot papers list` shows the ids.") from None


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


def related_by_paper(copilot: Copilot, query: str, paper_ids: list[str], *, per_paper: int = 2
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


def _arxiv_sources(client: ArxivClient, title: str, abstract: str, known: set[str]) -> list[Paper]:
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


def arxiv_results(client: ArxivClient | None, title: str, abstract: str,
                  known: set[str]) -> tuple[list[Paper], str | None]:
    """arXiv results for the user's paper (``client`` None: a new one), or none and a note saying why (offline,
    rate limited, nothing found)."""
    try:
        if client is None:
            client = ArxivClient(num_retries=1, check_reachable=True)
        rows = _arxiv_sources(client, title, abstract, known)
    except (IngestError, OSError) as exc:
        return [], f"arXiv search failed, so this draft uses the library only: {exc}"
    if not rows:
        return [], "arXiv search found no further papers; this draft uses the library only."
    return rows, None
