"""Follow-up questions made self-contained for retrieval, from the conversation's recent turns, with no LLM call.

"And what are its limitations?" after a question about SPECTER would search for "its limitations" alone. A
question leans on the turns before it when it opens like a continuation (*and*, *also*, *what about*), when it
names nothing and has at most :data:`SHORT_TERMS` searchable terms, or when it points back (a pronoun such as
*it*, *its*, *they*; a demonstrative such as *this* or *that* before a verb or a generic noun, or ending it) at
something it does not name itself: "What does S2ORC contain and how big is it?" names what *it* is before it, and
"What learning rate did they train SPECTER with?" names the work whose authors *they* are, so both stand alone;
"Is it better than SciBERT?" does not say what *it* is. Such a follow-up is searched for as itself plus the subject
terms (its names, when it has any) of the latest self-contained question among the recent turns, walking back over
follow-ups so that a chain of them keeps its subject. The question is still answered as asked: only retrieval sees
the rewritten text.

Detection (``python -m copilot.bench followups --detection``): 30 of the 32 follow-ups are taken for ones, and 1 of
28 self-contained questions with a pronoun (``tests/data/self_contained.jsonl``) is; the rule before this one took
all 28 (it read any pronoun as pointing back). A question that names nothing but holds its own antecedent ("What is
a transformer encoder, and why is it used …?") is still taken for a follow-up, and an object pronoun after a name
("Does SciBERT outperform it?") is read as that name: telling a noun from a verb needs a tagger.

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
# Pronouns that mostly mean a work's authors: with a name anywhere in the question, it says whose.
PEOPLE = frozenset("they their theirs he she his her him".split())
DEMONSTRATIVES = frozenset("this that these those".split())
# After "that", a word that makes it point back ("Why is that?", "How was that measured?", "that paper"), where
# "the dataset that SPECTER uses" is a relative clause. "this", "these" and "those" always point.
POINTING_ON = frozenset("""
is was are were be been does do did has have had can could would will should may might mean means meant work works
worked show shows showed compare compares paper papers method methods model models approach approaches result
results work study studies system systems dataset datasets corpus number numbers score scores metric metrics figure
table idea ideas claim claims finding findings one ones part step steps model's paper's
""".split())
# Before a pronoun, a word that makes it the subject of the question ("On what GPU was it trained?"): it then points
# outside the question unless a clause of its own names what it is first ("What is S2ORC and how big is it?").
SUBJECT_AFTER = frozenset("is was are were be does did do has have had can could will would should may might".split())
CLAUSE_BREAKS = frozenset("and but or so then because while whereas which when if".split())
# "it" that points at nothing ("Is it possible to ...", "Is it true that ...").
EXPLETIVE_AFTER_IT = frozenset("possible true necessary feasible worth common hard easy important make makes".split())
OPENERS = ("and ", "also ", "so ", "then ", "what about ", "how about ", "but ")
SHORT_TERMS = 2  # a question with no more searchable terms than this leans on the one before
_WORD = re.compile(r"[^\W_]+(?:'[a-z]+)?")
_CLAUSE = re.compile(r"[^\W_]+(?:'[a-z]+)?|[,;?.!]")  # words, and the marks that end a clause or a sentence
BREAKS = frozenset(",;?.!")


@dataclass(frozen=True)
class FollowUp:
    """How a follow-up is searched for: ``query`` is the question with the carried subject ``terms``, taken from
    the earlier question ``subject``."""

    query: str
    subject: str
    terms: tuple[str, ...] = ()


def _naming(i: int, word: str) -> bool:
    """Whether ``word``, the ``i``-th of its question, names something: written with a capital past the first
    word, or letters mixed with digits (*SPECTER*, *Semantic*, *S2ORC*)."""
    return (i > 0 and any(c.isupper() for c in word)) or (any(c.isdigit() for c in word) and not word.isdigit())


def _names(text: str) -> set[str]:
    """The words of ``text`` that name something (:func:`_naming`), lower-cased."""
    return {w.lower() for i, w in enumerate(_WORD.findall(text or "")) if _naming(i, w)}


def _pointers(words: list[str]) -> list[int]:
    """The positions of the words of ``words`` (lower-cased) that point back at something."""
    found = []
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else None
        if word == "that":  # also a relative pronoun: "the dataset that SPECTER uses"
            if after is None or after in POINTING_ON or after in BREAKS:
                found.append(i)
        elif word == "it" and after in EXPLETIVE_AFTER_IT:
            continue
        elif word in ANAPHORS:
            found.append(i)
    return found


def _unresolved(pointer: int, lowered: list[str], named: list[int]) -> bool:
    """Whether the word at ``pointer`` points outside the question: nothing the question names before it can be
    what it means."""
    word = lowered[pointer]
    if word in PEOPLE:
        return not named  # "they" beside a name: that work's authors
    before = [i for i in named if i < pointer]
    if word in DEMONSTRATIVES or (pointer > 0 and lowered[pointer - 1] in SUBJECT_AFTER):
        # A demonstrative, or the question's subject ("On what GPU was it trained?"): named inside the question
        # only by an earlier clause ("What is S2ORC, and how big is it?").
        return not any(set(lowered[i + 1:pointer]) & (CLAUSE_BREAKS | BREAKS) for i in before)
    return not before  # "How does SPECTER use its citations?": its own name before it


def is_follow_up(question: str) -> bool:
    """Whether ``question`` refers back to an earlier turn: it opens like a continuation, points back at something
    it does not name itself, or names nothing and has at most :data:`SHORT_TERMS` searchable terms ("Why?", "And
    the datasets?"; "What is S2ORC?" names its subject; see the module docstring)."""
    text = " ".join((question or "").split())
    lower = text.lower()
    if lower.startswith(OPENERS):
        return True
    words = _CLAUSE.findall(text)
    lowered = [w.lower() for w in words]
    named = [i for i, w in enumerate(words) if w not in BREAKS and _naming(i, w)]
    pointers = _pointers(lowered)
    if pointers:
        return any(_unresolved(i, lowered, named) for i in pointers)
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
