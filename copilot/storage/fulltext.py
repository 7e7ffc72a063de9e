"""Full-text queries from untrusted text: a question becomes a list of plain terms, then each backend's query.

A question is not a query language: quotes, ``NEAR``, ``*``, ``-``, ``OR`` and parentheses typed by a user are
words or nothing, never operators. Terms are the question's words and numbers (lower-cased, English function words
left out, each once, at most :data:`MAX_TERMS`); the backends join them with OR, so a long question still matches
a passage that holds only some of its words, and the ranking (BM25 on SQLite, ``ts_rank_cd`` on PostgreSQL)
puts the passages holding more of the rarer terms first.
"""

from __future__ import annotations

import re

MAX_TERMS = 32

# Function words: in nearly every passage, so they only slow a search down.
STOP_WORDS = frozenset("""
a about above across after again against all almost along also although always am among an and another any are
around as at be because been before being below between both but by can cannot could did do does doing done down
due during each either else enough etc even ever every few for from further had has have having he her here hers
him his how however i if in into is it its itself just least less like many may me might more most much must my
near neither no nor not now of off often on once one only onto or other others our ours out over own per perhaps
rather same several she should since so some such than that the their theirs them then there therefore these they
this those though through thus to too toward towards under until up upon us very via was we well were what when
where whether which while who whom whose why will with within without would yet you your
""".split())

_WORD = re.compile(r"[^\W_]+")


def query_terms(text: str | None) -> list[str]:
    """The searchable terms of ``text``: letters-and-digits runs, lower-cased, without function words, each once,
    in order; empty when nothing is left."""
    terms: list[str] = []
    for word in _WORD.findall((text or "").lower()):
        if word not in STOP_WORDS and word not in terms:
            terms.append(word)
            if len(terms) == MAX_TERMS:
                break
    return terms


def fts5_query(terms: list[str]) -> str:
    """SQLite FTS5's MATCH expression: each term a quoted string (no operator can appear), joined by OR."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def tsquery_text(terms: list[str]) -> str:
    """PostgreSQL ``to_tsquery`` input: each term a quoted lexeme, joined by ``|`` (OR)."""
    return " | ".join("'" + term.replace("'", "''").replace("\\", "") + "'" for term in terms)
