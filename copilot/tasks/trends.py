"""A personal view of research trends: trend keywords from recent papers, and research ideas that cite them.

As in Arxiv Copilot, the user's persona and the newest papers they can see are the input. Keywords are
extracted deterministically (TF-IDF over phrases that never cross a stop word or punctuation, with
scikit-learn when it is installed, else the same weighting counted by hand), so they cost no LLM call and do
not change between runs. Ideas are one LLM call; each idea is tied to the papers it cites, and an idea that
cites none is shown as *based on* the papers the model was given, never as citing them.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot import prompts
from copilot.grounding import SourceFacts, missing_facts
from copilot.storage import Store
from copilot.storage.fulltext import STOP_WORDS
from copilot.tasks.profile import persona_for_prompt
from copilot.tasks.writing.citations import CITATION_MARKER, citation_from_paper, citation_numbers, cite_mentions
from copilot.tasks.writing.drafts import unlink
from copilot.tasks.writing.generation import generate
from copilot.tasks.writing.model import Citation, DraftError
from copilot.tasks.writing.sources import body_chunks, truncate_tokens
from copilot.types import Paper

if TYPE_CHECKING:
    from copilot.engine import Copilot

IDEAS_MAX_TOKENS = 300
IDEA_SOURCE_TOKENS = 150  # per paper shown to the model: title and the start of its abstract
N_KEYWORDS = 8
PHRASE_RATIO = 0.5  # a phrase replaces a chosen word it contains when it scores at least this share of it
MIN_IDEA_WORDS = 6
MAX_IDEAS = 5

# Words every paper uses about itself: they say nothing about what is trending.
GENERIC_WORDS = frozenset("""
paper papers propose proposed proposes present presents presented introduce introduces introduced approach
approaches method methods result results show shows shown work works new novel task tasks use used uses using
based study studies studied demonstrate demonstrates experiment experiments experimental existing first second
third different various significant significantly improve improves improved improvement performance provide
provides state art well able make makes made including include includes two three large small high low best
better furthermore moreover finally recent recently set sets number numbers way ways find found given give gives
et al fig figure table section sections appendix related previous prior current research model models
system systems
""".split())


@dataclass
class Idea:
    """One research idea and the papers it comes from (cited by number, or the whole context when it cites none)."""

    text: str
    paper_ids: list[str]
    cited: bool = True  # False: the idea cited nothing, and ``paper_ids`` are the papers it was based on
    missing: list[str] = field(default_factory=list)  # names and numbers it states that none of the papers does


@dataclass
class Trends:
    """Trend keywords and ideas for one user, with the papers they came from and what they cost."""

    keywords: list[str]
    ideas: list[Idea]
    papers: list[dict[str, Any]]  # numbered as the ideas cite them: papers[0] is [1]
    llm_calls: int
    timings: dict[str, float]
    persona: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"keywords": self.keywords, "ideas": [asdict(i) for i in self.ideas], "papers": self.papers,
                "persona": self.persona, "notes": self.notes, "llm_calls": self.llm_calls, "timings": self.timings}

    def to_markdown(self) -> str:
        number = {p["paper_id"]: p["n"] for p in self.papers}
        parts = ["# Research trends and ideas"]
        if self.persona:
            parts.append(f"*For:* {self.persona}")
        parts += ["## Trending keywords", ", ".join(self.keywords) or "(none found)", "## Ideas"]
        lines = []
        for i, idea in enumerate(self.ideas, start=1):
            refs = ", ".join(f"[{number[p]}]" for p in idea.paper_ids if p in number)
            how = f"cites {refs}" if idea.cited else f"based on {refs}"
            warn = f" ⚠️ (not in the papers: {', '.join(idea.missing)})" if idea.missing else ""
            lines.append(f"{i}. {idea.text} ({how}){warn}")
        parts.append("\n".join(lines) or "(the model suggested none)")
        parts += ["## Papers", "\n".join(f"[{p['n']}] {p['reference']}" for p in self.papers)]
        if self.notes:
            parts.append("\n>\n".join(f"> {note}" for note in self.notes))
        return "\n\n".join(parts) + "\n"


# ----- keywords ----------------------------------------------------------------------------------------


def phrases(text: str, max_words: int = 3) -> list[str]:
    """Candidate phrases of ``text``: 1 to ``max_words`` content words in a row, never across a stop word,
    a generic word or punctuation (so "learning of representations" never becomes "learning representations")."""
    found = []
    for segment in re.split(r"[.,;:!?()\[\]{}\"“”]+|\s[-–—]\s", text.lower()):
        run: list[str] = []
        for token in re.findall(r"[a-z][a-z0-9\-]*[a-z0-9]|[a-z]", segment) + [""]:
            if token and len(token) >= 3 and token not in STOP_WORDS and token not in GENERIC_WORDS:
                run.append(token)
                continue
            for n in range(1, max_words + 1):
                found += [" ".join(run[i:i + n]) for i in range(len(run) - n + 1)]
            run = []
    return found


def _tfidf_scores(texts: list[str]) -> dict[str, tuple[float, int]]:
    """Each phrase's summed TF-IDF over ``texts`` and its document frequency (scikit-learn when installed)."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:
        return _counted_scores(texts)
    vectorizer = TfidfVectorizer(analyzer=phrases, sublinear_tf=True)
    matrix = vectorizer.fit_transform(texts)
    totals = np.asarray(matrix.sum(axis=0)).ravel()
    df = np.asarray((matrix > 0).sum(axis=0)).ravel()
    return {term: (float(totals[i]), int(df[i])) for term, i in vectorizer.vocabulary_.items()}


def _counted_scores(texts: list[str]) -> dict[str, tuple[float, int]]:
    """The same weighting as scikit-learn's (sublinear tf, smooth idf, l2 rows), counted by hand."""
    n = len(texts)
    counts = [Counter(phrases(t)) for t in texts]
    df = Counter(term for c in counts for term in c)
    idf = {term: math.log((1 + n) / (1 + d)) + 1 for term, d in df.items()}
    totals: Counter = Counter()
    for c in counts:
        weights = {term: (1 + math.log(tf)) * idf[term] for term, tf in c.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        for term, w in weights.items():
            totals[term] += w / norm
    return {term: (totals[term], df[term]) for term in totals}


def extract_keywords(texts: list[str], k: int = N_KEYWORDS) -> list[str]:
    """The ``k`` phrases that best say what ``texts`` are about together.

    Summed TF-IDF favours phrases that are prominent in many of the papers; with three or more papers a phrase
    shared by two of them beats one that only a single paper uses. A longer phrase replaces a chosen word it
    contains when it scores at least half as much ("graph" becomes "literature graph"), and a phrase inside
    one already chosen is skipped as redundant.
    """
    texts = [t for t in texts if t.strip()]
    if not texts:
        return []
    scores = _tfidf_scores(texts)
    shared = len(texts) >= 3

    def rank(term: str) -> tuple[bool, float, str]:
        score, df = scores[term]
        return (shared and df >= 2, score, term)

    chosen: list[str] = []
    for term in sorted(scores, key=rank, reverse=True):
        padded = f" {term} "
        if any(padded in f" {c} " for c in chosen):
            continue
        inside = [i for i, c in enumerate(chosen) if f" {c} " in padded]
        if inside:
            if all(scores[term][0] >= PHRASE_RATIO * scores[chosen[i]][0] for i in inside):
                chosen[inside[0]] = term
                chosen = [c for i, c in enumerate(chosen) if i not in inside[1:]]
            continue
        if len(chosen) < k:
            chosen.append(term)
        elif all(" " in c for c in chosen):
            break
    return chosen


# ----- papers ------------------------------------------------------------------------------------------


def _paper_vector(store: Store, paper_id: str) -> np.ndarray | None:
    vectors = [c.vector for c in store.chunks.of_paper(paper_id, vectors=True)
               if c.section is not None and c.section != "References"]
    if not vectors:
        return None
    mean = np.stack(vectors).mean(axis=0)
    return mean / (np.linalg.norm(mean) or 1.0)


def recent_papers(copilot: Copilot, *, user_id: str, persona: str | None, paper_ids: list[str] | None,
                  max_papers: int) -> list[Paper]:
    """The newest papers ``user_id`` may see (by publication date, else when they were added).

    With a persona and more candidates than room, the three times ``max_papers`` newest are ranked by how close
    they are to the persona, then shown newest first.
    """
    papers = copilot.library.list(user_id)
    if paper_ids:
        wanted = {p.strip() for p in paper_ids if p.strip()}
        unknown = wanted - {p.id for p in papers}
        if unknown:
            raise DraftError(f"No paper {', '.join(sorted(repr(u) for u in unknown))} in your library.")
        papers = [p for p in papers if p.id in wanted]
    papers.sort(key=lambda p: (p.published or p.added_at or "", p.added_at or ""), reverse=True)
    candidates = papers[:3 * max_papers]
    if persona and len(candidates) > max_papers:
        query = copilot.embedder.encode_query(persona)
        vectors = {p.id: _paper_vector(copilot.store, p.id) for p in candidates}
        closeness = {pid: float(v @ query) if v is not None else -1.0 for pid, v in vectors.items()}
        keep = set(sorted(closeness, key=closeness.get, reverse=True)[:max_papers])
        candidates = [p for p in candidates if p.id in keep]
    found = [copilot.store.papers.get(p.id) for p in candidates[:max_papers]]
    return [p for p in found if p is not None]


def _paper_text(copilot: Copilot, paper: Paper) -> str:
    """Title and abstract; a paper without an abstract lends its first body chunks instead."""
    text = paper.abstract or " ".join(c.text for c in body_chunks(copilot.store, paper.id)[:3])
    return f"{paper.title or ''}. {text}"


def _paper_entry(citation: Citation, paper: Paper) -> dict[str, Any]:
    """A paper of the list shown with the ideas: its citation, its dates, and its reference-list line."""
    return {"n": citation.n, "paper_id": citation.paper_id, "title": citation.title, "authors": citation.authors,
            "year": citation.year, "published": paper.published, "added_at": paper.added_at,
            "url": citation.url, "reference": citation.reference()}


# ----- ideas -------------------------------------------------------------------------------------------

_INLINE_NUMBER = re.compile(r"\s+\(?\d{1,2}[.)]$")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\(?\d{1,2}[.):]|idea\s*\d*\s*[:.)-])\s*", re.IGNORECASE)


def idea_citations(line: str, sources: list[Citation]) -> tuple[str, list[str]]:
    """One idea's text with markers naming no paper removed, and the ids of the papers it cites (in order).

    Unlike a draft, an idea keeps the numbers of the paper list it is shown with, so nothing is renumbered.
    """
    cited: list[str] = []

    def keep(match: re.Match) -> str:
        valid = sorted({n for n in citation_numbers(match.group(1)) if 1 <= n <= len(sources)})
        cited.extend(sources[n - 1].paper_id for n in valid if sources[n - 1].paper_id not in cited)
        return f"[{', '.join(map(str, valid))}]" if valid else ""

    text = re.sub(r"\s+([.,;:])", r"\1", CITATION_MARKER.sub(keep, cite_mentions(line, sources))).strip()
    leading = re.match(r"^((?:\[[\d, ]+\]\s*)+)(.+)$", text)
    if leading:  # "[4] A new approach ..." reads better as "A new approach ... [4]"
        text = f"{leading.group(2).strip()} {leading.group(1).strip()}"
    return text, cited


def parse_ideas(reply: str, sources: list[Citation]) -> list[Idea]:
    """Ideas from a reply: one per line (or per sentence when the model wrote a paragraph), at most five.

    ``[n]`` markers map to ``sources[n-1]``, and so does naming a paper by its short name (its title, see
    :func:`copilot.tasks.writing.citations.cite_mentions`); markers naming no paper are dropped; an idea citing
    nothing is attached to every paper of the context, marked as not cited.
    """
    paper_ids = [s.paper_id for s in sources]
    lines = [_LIST_MARKER.sub("", line).strip() for line in reply.splitlines()]
    lines = [line for line in lines if line and not line.rstrip().endswith(":")]
    if len(lines) < 3:
        lines = [s.strip() for line in lines for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", line) if s.strip()]
    # A paragraph numbered inline ("... Google) 2. The next idea") leaves the next number on each sentence.
    lines = [_INLINE_NUMBER.sub("", line).strip() for line in lines]
    ideas: list[Idea] = []
    seen: set[str] = set()
    for line in lines:
        text, cited = idea_citations(line, sources)
        key = re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
        if len(text.split()) < MIN_IDEA_WORDS or key in seen:
            continue
        seen.add(key)
        ideas.append(Idea(text, cited, True) if cited else Idea(text, list(paper_ids), False))
        if len(ideas) == MAX_IDEAS:
            break
    return ideas


def trends_and_ideas(copilot: Copilot, *, user_id: str, persona: str | None, paper_ids: list[str] | None = None,
                     max_papers: int = 8) -> Trends:
    """Trend keywords and 3 to 5 cited research ideas from the user's persona and their newest papers.

    ``persona`` None falls back to the stored one (see :mod:`copilot.tasks.profile`). One LLM call.
    """
    start = time.perf_counter()
    persona = (persona or "").strip() or persona_for_prompt(copilot.store, user_id)
    papers = recent_papers(copilot, user_id=user_id, persona=persona, paper_ids=paper_ids, max_papers=max_papers)
    if not papers:
        raise DraftError("The library is empty: add papers first (`python -m copilot papers add ...`), or follow "
                         "arXiv categories and refresh.")
    texts = [_paper_text(copilot, p) for p in papers]
    keywords = extract_keywords(texts)
    timings = {"keywords_ms": round(1000 * (time.perf_counter() - start), 1)}

    t1 = time.perf_counter()
    budget = max(60, min(IDEA_SOURCE_TOKENS, copilot.settings.context_budget_tokens // len(papers)))
    shown = [truncate_tokens(t, budget, copilot.llm.count_tokens) for t in texts]
    reply, calls = generate(copilot, prompts.IDEAS_SYSTEM, prompts.ideas_user(persona, shown, keywords),
                            max_tokens=IDEAS_MAX_TOKENS, shots=[prompts.IDEAS_SHOT])
    citations = [citation_from_paper(n, p) for n, p in enumerate(papers, start=1)]
    ideas = parse_ideas(unlink(reply, shown)[0], citations)
    # An idea is new by nature, but the names and numbers it builds on must be the papers' own.
    stated = SourceFacts([*shown, *(c.title for c in citations), persona or "", *keywords])
    for idea in ideas:
        idea.missing = missing_facts(idea.text, stated)
    timings["ideas_ms"] = round(1000 * (time.perf_counter() - t1), 1)
    timings["total_ms"] = round(1000 * (time.perf_counter() - start), 1)
    notes = []
    if len(ideas) < 3:
        notes.append(f"The model suggested {len(ideas)} usable idea(s); a larger model suggests more.")
    if any(i.missing for i in ideas):
        notes.append("Ideas marked ⚠️ name something (a dataset, a method, a number) that none of the papers states.")
    if any(not i.cited for i in ideas):
        notes.append("Ideas that cite no paper (by number or name) are shown as based on all the papers above.")
    return Trends(keywords, ideas, [_paper_entry(c, p) for c, p in zip(citations, papers, strict=True)], calls, timings,
                  persona=persona, notes=notes)
