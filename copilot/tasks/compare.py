"""A comparison table across papers: rows the papers, columns aspects (task, data, method, ...), each cell filled
from that paper's own best evidence for the aspect, with the sentence that shows it, or "not stated".

A cell is one question about one paper: the aspect's question (:func:`aspect_question`) is retrieved for and
compressed to the sentences that bear on it, as a chat question scoped to that paper is (no thought recalled or
written). When nothing in the paper bears on it, the cell is "not stated" without asking the model; otherwise one
short model call (:data:`CELL_MAX_TOKENS`) writes the cell, which then runs through the check every answer runs
through (:func:`copilot.grounding.check`): a cell whose facts the paper does not state is shown marked ⚠️, with
them listed; a model that finds nothing makes the cell "not stated". Cells stream out as they are filled.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from copilot import grounding, prompts
from copilot.answering import (
    plain_facts,
    source_heads,
    source_texts,
    stream_until_repeating,
    supporting_quotes,
)
from copilot.errors import UserError
from copilot.llm import scheduling
from copilot.llm.base import TokenTrace
from copilot.tasks.writing.bibtex import bibtex_entries
from copilot.tasks.writing.citations import citation_from_paper
from copilot.tasks.writing.model import Citation
from copilot.tasks.writing.sources import visible_paper
from copilot.thoughts import REFUSAL
from copilot.types import ComparisonCell, Paper, RetrievedItem
from ingest.chunking import ABSTRACT_SECTION

if TYPE_CHECKING:
    from copilot.engine import Copilot

DEFAULT_ASPECTS = ("task", "data", "method", "metric", "main result", "limitation")
MIN_PAPERS, MAX_PAPERS = 2, 10
MAX_ASPECTS = 8
MAX_ASPECT_CHARS = 60
MAX_ID_CHARS = 100
CELL_MAX_TOKENS = 48  # one short phrase
NOT_STATED = "not stated"
_NOT_STATED = re.compile(r"^\W*(not stated|n/?a|none|unknown|not (mentioned|specified|given|reported))\W*$",
                         re.IGNORECASE)


@dataclass(frozen=True)
class Aspect:
    """How a column is asked: its question; whether the paper's abstract, which states a paper's task, data, method
    and main result, is read first; and the words a passage must hold to state it at all (empty: any passage may).
    A cell whose sources hold none of those words is "not stated" without asking the model, and so is a cell whose
    supporting sentence holds none."""

    question: str
    abstract: str = ""  # "only": the abstract alone answers it; "first": the abstract, then the passages found
    needs: tuple[str, ...] = ()


_ASPECTS = {
    "task": Aspect("What task or problem does the paper address?", abstract="only"),
    "data": Aspect("What datasets or data does the paper use?", abstract="first"),
    "method": Aspect("How does the paper's method or approach work, in a few words?", abstract="only"),
    "main result": Aspect("What is the paper's main result, with its number?", abstract="first"),
    "metric": Aspect("What evaluation metrics does the paper report?",
                     needs=("metric", "measure", "score", "accuracy", "f1", "precision", "recall", "bleu", "rouge",
                            "map", "ndcg", "auc", "correlation", "agreement", "evaluate", "evaluation")),
    "limitation": Aspect("What limitations or shortcomings of its own work does the paper state?",
                         needs=("limitation", "limited", "limit", "shortcoming", "drawback", "weakness", "caveat")),
    "hardware": Aspect("What hardware (GPUs, TPUs or CPUs) does the paper use?",
                       needs=("gpu", "tpu", "cpu", "hardware", "core", "a100", "v100", "titan")),
}
_ALIASES = {"dataset": "data", "datasets": "data", "result": "main result", "results": "main result",
            "limitations": "limitation", "metrics": "metric", "approach": "method", "problem": "task"}


def aspect_spec(aspect: str) -> Aspect:
    """How ``aspect`` is asked: the usual aspects by a researcher's question, any other as "What does the paper say
    about its <aspect>?", stated only by passages that name it."""
    key = " ".join(aspect.lower().split())
    known = _ASPECTS.get(_ALIASES.get(key, key))
    if known is not None:
        return known
    return Aspect(f"What does the paper say about its {aspect.strip()}?", needs=tuple(sorted(grounding.terms(aspect))))


def aspect_question(aspect: str) -> str:
    return aspect_spec(aspect).question


def check_request(paper_ids: Sequence[str], aspects: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The papers (2 to 10, each once) and aspects (the default six when none is given; at most 8 of at most 60
    characters each) of a comparison, or a one-line :class:`UserError`."""
    if isinstance(paper_ids, str) or any(not isinstance(p, str) for p in paper_ids) or (
            aspects is not None and (isinstance(aspects, str) or any(not isinstance(a, str) for a in aspects))):
        raise UserError("Give the papers and the aspects as lists of texts.")
    if any(len(p) > MAX_ID_CHARS for p in paper_ids):
        raise UserError(f"A paper id is at most {MAX_ID_CHARS} characters: pick papers from your library.")
    papers = list(dict.fromkeys(p.strip() for p in paper_ids if p and p.strip()))
    if len(papers) < MIN_PAPERS:
        raise UserError(f"Choose at least {MIN_PAPERS} papers to compare.")
    if len(papers) > MAX_PAPERS:
        raise UserError(f"Compare at most {MAX_PAPERS} papers at a time (you chose {len(papers)}).")
    chosen = list(dict.fromkeys(" ".join(a.split()) for a in aspects or () if a and a.strip()))
    chosen = chosen or list(DEFAULT_ASPECTS)
    if len(chosen) > MAX_ASPECTS:
        raise UserError(f"Compare at most {MAX_ASPECTS} aspects at a time (you named {len(chosen)}).")
    long = next((a for a in chosen if len(a) > MAX_ASPECT_CHARS), None)
    if long is not None:
        raise UserError(f"An aspect is a few words (at most {MAX_ASPECT_CHARS} characters): \"{long[:40]}…\" is "
                        "longer.")
    return papers, chosen


def parse_aspects(text: str | None) -> list[str]:
    """Aspects as a user types them: separated by commas, semicolons or new lines."""
    return [a.strip() for a in re.split(r"[,;\n]", text or "") if a.strip()]


@dataclass
class Comparison:
    """A filled comparison table: its papers (rows, as citations for BibTeX), aspects (columns) and cells."""

    papers: list[Citation]
    aspects: list[str]
    cells: list[ComparisonCell] = field(default_factory=list)
    model: str = ""
    seconds: float = 0.0

    def cell(self, paper_id: str, aspect: str) -> ComparisonCell | None:
        return next((c for c in self.cells if c.paper_id == paper_id and c.aspect == aspect), None)

    @property
    def llm_calls(self) -> int:
        return sum(c.llm_calls for c in self.cells)

    def rows(self) -> list[list[str]]:
        """The table as shown: one row a paper (its title first), one column an aspect."""
        return [[p.title or p.paper_id, *((c.shown() if (c := self.cell(p.paper_id, a)) else "…")
                                          for a in self.aspects)] for p in self.papers]

    def to_markdown(self, *, evidence: bool = True) -> str:
        """The table, then (with ``evidence``) each stated cell's evidence sentence with its paper and page, and
        what the table cost."""
        def esc(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        lines = ["| Paper | " + " | ".join(esc(a) for a in self.aspects) + " |",
                 "|---|" + "---|" * len(self.aspects)]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in self.rows()]
        if not evidence:
            return "\n".join(lines)
        quotes = []
        for p in self.papers:
            for a in self.aspects:
                c = self.cell(p.paper_id, a)
                if c is None or not c.stated:
                    continue
                where = f"{p.title or p.paper_id}, p. {c.evidence[0].page}" if c.evidence else p.title or p.paper_id
                quote = f"> {c.evidence[0].quote} ({where})" if c.evidence else "> no supporting sentence found"
                if c.supported:
                    flag = ""
                elif c.unsure and not c.missing:
                    flag = f" ⚠️ the model was not sure of {plain_facts(c.unsure)}: check it against the quote"
                else:
                    flag = f" ⚠️ not supported by the paper: {', '.join(c.missing) or 'its wording'}"
                quotes.append(f"- **{esc(p.title or p.paper_id)} · {esc(a)}**: {c.text}{flag}\n  {quote}")
        cost = f"\n\n*{self.llm_calls} LLM call(s), {self.seconds:.1f} s{f', {self.model}' if self.model else ''}.*"
        return "\n".join(lines) + ("\n\n**Evidence**\n\n" + "\n".join(quotes) if quotes else "") + cost

    def to_csv(self) -> str:
        """One row a paper: its id and title, then for each aspect the cell, whether it is supported, and the
        evidence sentence with its page."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["paper_id", "title", *(f"{a}{suffix}" for a in self.aspects
                                                for suffix in ("", " supported", " evidence", " page"))])
        for p in self.papers:
            row = [p.paper_id, p.title]
            for a in self.aspects:
                c = self.cell(p.paper_id, a)
                q = c.evidence[0] if c and c.evidence else None
                row += [c.text if c and c.stated else NOT_STATED, "yes" if c and c.supported else "no",
                        q.quote if q else "", q.page if q and q.page else ""]
            writer.writerow(row)
        return out.getvalue()

    def bibtex(self) -> str:
        return bibtex_entries(self.papers)

    def as_dict(self) -> dict[str, Any]:
        return {"aspects": self.aspects, "papers": [{"paper_id": p.paper_id, "title": p.title} for p in self.papers],
                "cells": [c.as_dict() for c in self.cells], "llm_calls": self.llm_calls, "model": self.model,
                "seconds": round(self.seconds, 2), "markdown": self.to_markdown(), "bibtex": self.bibtex()}


def fill_cell(copilot: Copilot, paper: Paper, aspect: str, *, user_id: str) -> ComparisonCell:
    """One cell: the paper's best evidence for ``aspect`` (its abstract first for the aspects an abstract states),
    then at most one short model call, checked (see :class:`Aspect`)."""
    start = time.perf_counter()
    settings = copilot.settings
    spec = aspect_spec(aspect)
    needs = {t for word in spec.needs for t in grounding.terms(word)}

    def blank(calls: int = 0) -> ComparisonCell:
        return ComparisonCell(paper.id, aspect, NOT_STATED, False, llm_calls=calls,
                              seconds=time.perf_counter() - start)

    # An aspect an abstract states is read there first (alone, for the task and the method, which then need no
    # retrieval): a paper with an abstract always has something that bears on it.
    pinned = _abstract_first(copilot, paper, [], settings.context_budget_tokens) if spec.abstract == "only" else []
    items: list[RetrievedItem] = []
    if not pinned:
        found = copilot.gather(spec.question, user_id=user_id, use_thoughts=False, paper_ids=[paper.id])
        items = list(found.items)
        if spec.abstract:
            pinned = _abstract_first(copilot, paper, items, settings.context_budget_tokens)
        if not pinned and (not items or found.bearing < settings.min_bearing):
            return blank()
    if needs and not any(needs & grounding.terms(item.text) for item in items):
        return blank()
    items = pinned or items
    messages = [{"role": "system", "content": prompts.COMPARE_SYSTEM}, *prompts.COMPARE_SHOT,
                {"role": "user", "content": prompts.compare_user(aspect, spec.question, source_texts(items))}]
    reply = ""
    floor = settings.fact_min_probability
    trace = TokenTrace(most=CELL_MAX_TOKENS) if floor > 0 else None  # read only when the rule is on
    for reply in stream_until_repeating(copilot.llm, messages, max_tokens=CELL_MAX_TOKENS,
                                        temperature=settings.temperature, trace=trace):
        pass
    text = _one_phrase(reply, aspect)
    if not text or _NOT_STATED.match(grounding.strip_citations(text)) or REFUSAL.search(text) or _echoes(text):
        return blank(1)
    checked = grounding.check(text, items, copilot.embedder, settings.grounding_threshold,
                              heads=source_heads(items), question=spec.question)
    evidence = supporting_quotes(checked, items, settings)
    if needs and not any(needs & grounding.terms(q.quote) for q in evidence):
        return blank(1)  # what it wrote does not rest on a passage about the aspect
    missing = sorted({m for s in checked.sentences for m in s.missing})
    # A fact the model wrote unsure (a guess, or a number read from the wrong row) marks the cell, as it declines
    # an answer (copilot.answering.unsure_reason); the cell keeps its evidence for the reader to judge.
    unsure = [fact for fact, _ in grounding.unsure_facts(text, trace.tokens, floor, spec.question)] if trace else []
    return ComparisonCell(paper.id, aspect, grounding.strip_citations(text), True,
                          supported=checked.grounded and not unsure, evidence=evidence, missing=missing,
                          unsure=unsure, llm_calls=1, seconds=time.perf_counter() - start)


def _abstract_first(copilot: Copilot, paper: Paper, items: list[RetrievedItem], budget: int) -> list[RetrievedItem]:
    """``items`` after the paper's abstract (cut to half the budget), as many as still fit the budget; none when
    the paper has no abstract."""
    chunks = [c for c in copilot.store.chunks.of_paper(paper.id) if c.section == ABSTRACT_SECTION]
    abstract = " ".join(c.text for c in chunks)
    if not abstract.strip():
        return []
    count = copilot.llm.count_tokens
    words = abstract.split()
    while words and count(" ".join(words)) > budget // 2:
        words = words[:int(len(words) * 0.8)]
    head = RetrievedItem("chunk", chunks[0].id, " ".join(words), 1.0, paper_id=paper.id, section=ABSTRACT_SECTION,
                         page_start=1, page_end=1, paper_title=paper.title)
    kept, used = [head], count(head.text)
    for item in items:
        if item.section == ABSTRACT_SECTION:
            continue
        cost = count(item.text)
        if used + cost > budget:
            break
        kept.append(item)
        used += cost
    return kept


def _echoes(text: str) -> bool:
    """Does the cell repeat a worked cell shown to the model (:data:`copilot.prompts.COMPARE_SHOT`) rather than read
    its own sources? Most of its words are the example's."""
    said = grounding.terms(grounding.strip_citations(text))
    examples = [grounding.terms(m["content"]) for m in prompts.COMPARE_SHOT if m["role"] == "assistant"]
    return bool(said) and any(len(said & shown) >= 0.6 * len(said) for shown in examples)


def _one_phrase(reply: str, aspect: str) -> str:
    """The model's cell: its first line, without a label it repeated ("Cell:", "Task:")."""
    line = next((x.strip() for x in reply.strip().splitlines() if x.strip()), "")
    labels = "|".join(["cell", "answer", "column", re.escape(aspect.strip())])
    return re.sub(rf"^\W*(?:{labels})\W*:\s*(?=\S)", "", line, flags=re.IGNORECASE).strip()


def compare_stream(copilot: Copilot, paper_ids: Sequence[str], aspects: Sequence[str] | None, *,
                   user_id: str) -> Iterator[ComparisonCell | Comparison]:
    """The :class:`Comparison` before any cell is filled (its rows and columns), each cell as it is filled (paper by
    paper, aspect by aspect; the table holds it too), then the table again, whole. Papers the user may not see are
    refused before any cell is filled."""
    start = time.perf_counter()
    wanted, chosen = check_request(paper_ids, aspects)
    papers = [visible_paper(copilot, pid, user_id) for pid in wanted]
    table = Comparison([citation_from_paper(n, p) for n, p in enumerate(papers, start=1)], chosen,
                       model=copilot.llm.name)
    yield table
    for paper in papers:
        for aspect in chosen:
            with scheduling(user_id):  # its call waits its turn as this user's, beside the chat's answers
                cell = fill_cell(copilot, paper, aspect, user_id=user_id)
            table.cells.append(cell)
            table.seconds = time.perf_counter() - start
            yield cell
    yield table
