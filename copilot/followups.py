"""Follow-up questions made self-contained for retrieval, from the conversation's recent turns, with no LLM call.

"And what are its limitations?" after a question about SPECTER would search for "its limitations" alone. A
question leans on the turns before it when it refers back (a pronoun or demonstrative such as *it*, *its*,
*they*, *this*; an opening *and*, *also*, *what about*), or names nothing and has at most :data:`SHORT_TERMS`
searchable terms. Such a follow-up is searched for as itself plus the subject terms (its names, when it has
any) of the latest self-contained question among the recent turns, walking back over follow-ups so that a chain of
them keeps its subject. The question is still answered as asked: only retrieval sees the rewritten text.

Measured on 32 scripted follow-ups over the four test papers (``python -m copilot.bench followups``,
docs/benchmarks.md, "Follow-up questions"): with the subject terms every follow-up finds its paper in the top 5
(0.969 alone) and 83% of the top 5 come from it (65% alone), for one fact in 32 no longer in the top 5 (Recall@5 0.875, 0.906 alone):
with four papers, a follow-up's own words mostly name a passage only one of them has. Fusing the two searches keeps
the question's Recall@5 but gives way to it where it is confidently wrong ("its limitations" after SPECTER, with
another paper's limitations section); fusing in the previous answer's top chunks loses more (0.844): the next
question asks for another passage of the same paper.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from copilot.storage.fulltext import query_terms

# Words that point back at something named earlier.
ANAPHORS = frozenset("""
it its it's itself they them their theirs themselves this that these those he she his her him former latter
""".split())
OPENERS = ("and ", "also ", "so ", "then ", "what about ", "how about ", "but ")
SHORT_TERMS = 2  # a question with no more searchable terms than this leans on the one before
_WORD = re.compile(r"[^\W_]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class FollowUp:
    """How a follow-up is searched for: ``query`` is the question with the carried subject ``terms``, taken from
    the earlier question ``subject``."""

    query: str
    subject: str
    terms: tuple[str, ...] = ()


def _names(text: str) -> set[str]:
    """The words of ``text`` that name something: written with a capital past its first word, or letters mixed
    with digits (*SPECTER*, *Semantic*, *S2ORC*), lower-cased."""
    words = _WORD.findall(text or "")
    return {w.lower() for i, w in enumerate(words)
            if (i > 0 and any(c.isupper() for c in w)) or (any(c.isdigit() for c in w) and not w.isdigit())}


def is_follow_up(question: str) -> bool:
    """Whether ``question`` refers back to an earlier turn: it holds a word that points back, opens like a
    continuation, or names nothing and has at most :data:`SHORT_TERMS` searchable terms ("Why?", "And the
    datasets?"; "What is S2ORC?" names its subject)."""
    text = " ".join((question or "").split())
    lower = text.lower()
    if set(_WORD.findall(lower)) & ANAPHORS or lower.startswith(OPENERS):
        return True
    return len(query_terms(lower)) <= SHORT_TERMS and not _names(text)


def subject_of(previous: Sequence[str]) -> str | None:
    """The latest of the ``previous`` questions (oldest first) that stands on its own; the oldest one when every
    one of them is a follow-up; None without any."""
    for question in reversed(previous):
        if not is_follow_up(question):
            return question
    return previous[0] if previous else None


def subject_terms(subject: str) -> list[str]:
    """The searchable terms that name the subject of ``subject``: its names (a word written with a capital past
    the question's first word, an acronym, a word with a digit: *SPECTER*, *Semantic Scholar*, *S2ORC*) when it
    has any, else all its terms (the predicate, such as *trained*, would pull passages about that instead)."""
    named = _names(subject)
    terms = query_terms(subject)
    return [t for t in terms if t in named] or terms


def follow_up(question: str, previous: Sequence[str]) -> FollowUp | None:
    """How to search for ``question`` after the ``previous`` questions of its conversation (the recent ones,
    oldest first), or None when it stands on its own, there is nothing before it, or nothing to carry."""
    if not previous or not is_follow_up(question):
        return None
    subject = subject_of(previous) or ""
    asked = set(query_terms(question))
    terms = tuple(t for t in subject_terms(subject) if t not in asked)
    if not terms:
        return None
    return FollowUp(query=f"{question.strip()} {' '.join(terms)}", subject=subject, terms=terms)
