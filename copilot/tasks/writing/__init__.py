"""Drafting with citations: a paper's abstract from its body, a synthesis of several papers, and a related-work
section for the user's own paper.

Every draft is one LLM call over numbered sources, capped at :data:`DRAFT_MAX_TOKENS`. A small model cites
badly, so the reply is post-processed rather than trusted: citation markers are renumbered by first
appearance, markers naming no source are removed, and the citation list holds exactly the papers the text
cites. When the text cites nothing, the papers it was written from are listed as *sources*, never passed off
as citations. Users draft only over papers they may see (public arXiv papers and their own uploads).

The modules, in the order they build on each other: :mod:`.model` (Citation, Draft), :mod:`.bibtex`,
:mod:`.citations` (numbers, resolving, mentions), :mod:`.sources` (what a draft is written from),
:mod:`.generation` (the LLM call) and :mod:`.drafts` (the three drafts).
"""

from copilot.tasks.writing.bibtex import bib_escape, bib_verbatim, bibtex_entries, bibtex_entry, bibtex_key
from copilot.tasks.writing.citations import (
    AUTHOR_YEAR,
    CITATION_MARKER,
    author_line,
    citation_from_paper,
    citation_numbers,
    cite_mentions,
    resolve_citations,
    short_name,
    year_of,
)
from copilot.tasks.writing.drafts import (
    MAX_RELATED_PAPERS,
    MAX_SOURCE_TOKENS,
    MIN_SYNTHESIS_PAPERS,
    RELATED_NEEDS_TITLE_OR_ABSTRACT,
    SYNTHESIS_NEEDS_PAPERS,
    draft_abstract,
    draft_related_work,
    draft_synthesis,
)
from copilot.tasks.writing.generation import DRAFT_MAX_TOKENS, finish_text, generate
from copilot.tasks.writing.model import Citation, Draft, DraftError, OnText
from copilot.tasks.writing.sources import (
    MAX_ARXIV_RESULTS,
    RELATED_MIN_SCORE,
    arxiv_results,
    body_chunks,
    related_by_paper,
    scrub_sentences,
    select_excerpts,
    truncate_tokens,
    visible_paper,
)

__all__ = [
    "AUTHOR_YEAR", "CITATION_MARKER", "DRAFT_MAX_TOKENS", "MAX_ARXIV_RESULTS", "MAX_RELATED_PAPERS",
    "MAX_SOURCE_TOKENS", "MIN_SYNTHESIS_PAPERS", "RELATED_MIN_SCORE", "RELATED_NEEDS_TITLE_OR_ABSTRACT",
    "SYNTHESIS_NEEDS_PAPERS", "Citation", "Draft", "DraftError", "OnText", "arxiv_results", "author_line",
    "bib_escape", "bib_verbatim", "bibtex_entries", "bibtex_entry", "bibtex_key", "body_chunks",
    "citation_from_paper", "citation_numbers", "cite_mentions", "draft_abstract", "draft_related_work",
    "draft_synthesis", "finish_text", "generate", "related_by_paper", "resolve_citations",
    "scrub_sentences", "select_excerpts", "short_name", "truncate_tokens", "visible_paper",
    "year_of",
]
