"""Follow-up questions made self-contained for retrieval, from the conversation's recent turns, with no LLM call.

"And what are its limitations?" after a question about SPECTER would search for "its limitations" alone. A
question leans on the turns before it when it refers back (a pronoun or demonstrative such as *it*, *its*,
*they*, *this*; an opening *and*, *also*, *what about*) or names almost nothing (at most
:data:`SHORT_TERMS` searchable terms). Such a follow-up is searched for as itself plus the subject terms (its names, when it has any) of
the latest self-contained question among the recent turns (walking back over follow-ups, so a chain of them keeps its
subject), and the previous answer's top chunks are kept as candidates (:func:`copilot.retrieval.carry_sources`).
The question is still answered as asked: only retrieval sees the rewritten text. The effect is measured by
``python -m copilot.bench followups`` (README, "Follow-up questions").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from copilot.storage.fulltext import query_terms

# Words that point back at something named earlier.
ANAPHORS = frozenset("""
it its it's itself they them their theirs themselves this that these those he she his her him former latter
""".split())
OPENERS = ("and ", "also ", "so ", "then ", "what about ", "how about ", "but ")
SHORT_TERMS = 2  # a question with no more searchable terms than this leans on the one before
CARRIED_SOURCES = 3  # the previous answer's top chunks kept as candidates
_WORD = re.compile(r"[^\W_]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class PreviousTurn:
    """What a follow-up may lean on from one earlier turn: its question and its sources in their order (the
    answered query's records: ``kind``, ``id``, ``paper_id``)."""

    question: str
    sources: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class FollowUp:
    """How a follow-up is searched for: ``query`` is the question with the carried subject terms, ``subject`` the
    earlier question they come from, ``carried`` the previous answer's top chunk ids."""

    query: str
    subject: str
    terms: tuple[str, ...] = ()
    carried: tuple[int, ...] = field(default_factory=tuple)


def is_follow_up(question: str) -> bool:
    """Whether ``question`` refers back to an earlier turn (see the module docstring)."""
    text = " ".join((question or "").lower().split())
    words = set(_WORD.findall(text))
    return bool(words & ANAPHORS) or text.startswith(OPENERS) or len(query_terms(text)) <= SHORT_TERMS


def subject_of(turns: Sequence[PreviousTurn]) -> str | None:
    """The latest question among ``turns`` (oldest first) that stands on its own; the oldest one when every one
    of them is a follow-up; None without turns."""
    for turn in reversed(turns):
        if not is_follow_up(turn.question):
            return turn.question
    return turns[0].question if turns else None


def subject_terms(subject: str) -> list[str]:
    """The searchable terms that name the subject of ``subject``: its names (a word written with a capital past
    the question's first word, an acronym, a word with a digit: *SPECTER*, *Semantic Scholar*, *S2ORC*) when it
    has any, else all its terms (the predicate, such as *trained*, would pull passages about that instead)."""
    words = _WORD.findall(subject or "")
    named = {w.lower() for i, w in enumerate(words)
             if any(c.isdigit() for c in w) or (i > 0 and any(c.isupper() for c in w))}
    terms = query_terms(subject)
    return [t for t in terms if t in named] or terms


def follow_up(question: str, turns: Sequence[PreviousTurn], *, carry: int = CARRIED_SOURCES) -> FollowUp | None:
    """How to search for ``question`` after ``turns`` (the conversation's recent ones, oldest first), or None when
    it stands on its own (or there is nothing before it)."""
    if not turns or not is_follow_up(question):
        return None
    subject = subject_of(turns) or ""
    asked = set(query_terms(question))
    terms = tuple(t for t in subject_terms(subject) if t not in asked)
    carried = tuple(int(s["id"]) for s in turns[-1].sources if s.get("kind") == "chunk")[:carry]
    if not terms and not carried:
        return None
    query = f"{question.strip()} {' '.join(terms)}".strip()
    return FollowUp(query=query, subject=subject, terms=terms, carried=carried)
