"""Warm-up: seed the thought memory of a new paper with simulated questions.

When a paper is added, the LLM writes questions a researcher might ask: some from the title and abstract,
some from one random paragraph of the body. Each question then runs through the normal pipeline (retrieve,
answer, distil a thought), so later users start from a memory that already knows the paper.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from copilot import prompts
from copilot.errors import NotFound
from copilot.llm import ChatModel

if TYPE_CHECKING:
    from copilot.engine import Copilot

_PREFIX = re.compile(r"^\s*(?:[-*•]|\(?\d{1,2}[.):]|[A-Ea-e][.):]|(?:question|q)\s*\d*\s*[-:.)]?)\s*", re.IGNORECASE)
MAX_ATTEMPTS = 3


@dataclass
class WarmupReport:
    paper_id: str
    questions: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # the thought outcome of each question
    llm_calls: int = 0


def parse_questions(reply: str) -> list[str]:
    """Questions from a reply, one per line, with list markers ("1.", "A:", "Question 2 -") removed."""
    questions = []
    for line in reply.splitlines():
        text = _PREFIX.sub("", line).strip()
        if text.endswith("?") and len(text.split()) >= 4 and text not in questions:
            questions.append(text)
    return questions


def simulated_questions(llm: ChatModel, prompt: str, n: int, *, temperature: float = 0.7) -> tuple[list[str], int]:
    """Up to ``n`` distinct questions for ``prompt``; a small model often writes fewer, so ask up to 3 times."""
    found: list[str] = []
    calls = 0
    for _ in range(MAX_ATTEMPTS):
        reply = llm.chat([{"role": "system", "content": prompts.WARMUP_SYSTEM}, {"role": "user", "content": prompt}],
                         max_tokens=40 * n, temperature=temperature)
        calls += 1
        for question in parse_questions(reply):
            if question.lower() not in {q.lower() for q in found}:
                found.append(question)
        if len(found) >= n:
            break
    return found[:n], calls


def warm_up(copilot: Copilot, paper_id: str, *, user_id: str, n_abstract: int = 5, n_paragraph: int = 5,
            seed: int = 0, progress: Callable[[float, str], None] | None = None) -> WarmupReport:
    """Ask simulated questions about ``paper_id`` through ``copilot``, each answered and distilled into a thought."""
    store = copilot.store
    paper = store.papers.get(paper_id)
    if paper is None:
        raise NotFound(f"No paper '{paper_id}' in the library.")
    body = [c.text for c in store.chunks.of_paper(paper_id) if c.section is not None and c.section != "Abstract"]
    report = WarmupReport(paper_id)
    questions, calls = simulated_questions(
        copilot.llm, prompts.warmup_from_abstract(paper.title or "", paper.abstract or "", n_abstract),
        n_abstract)
    report.llm_calls += calls
    if body and n_paragraph:
        paragraph = random.Random(seed).choice(body)
        more, calls = simulated_questions(copilot.llm, prompts.warmup_from_paragraph(paragraph, n_paragraph),
                                          n_paragraph)
        report.llm_calls += calls
        questions += [q for q in more if q not in questions]
    for i, question in enumerate(questions):
        if progress:
            progress(i / max(1, len(questions)), f"Warm-up question {i + 1}/{len(questions)}")
        result = copilot.ask(question, user_id=user_id, paper_ids=[paper_id])
        copilot.flush()
        report.questions.append(question)
        report.outcomes.append(result.thought.outcome if result.thought else "pending")
        report.llm_calls += result.as_dict()["llm_calls"]
    if progress:
        progress(1.0, "Warm-up done")
    return report
