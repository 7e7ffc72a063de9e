"""The grounding check: how well each sentence of an answer is supported by the sources it was written from.

No LLM call. The answer's sentences (citation markers stripped) and the sources' sentences are embedded in one
batch; each answer sentence is then scored against each source by two pieces of evidence: the cosine to that
source's closest sentence, and the share of the sentence's rare terms (content words, numbers and names, weighted
by their IDF over the source sentences, so a term absent from every source weighs most) that the source contains.
A logistic curve fitted on ScholarQA-Multi expert answers (``python -m copilot.tools.calibration grounding``)
turns the two into the support score; the best-supporting source gives ``source_n`` and ``quote``. The answer is
grounded when every sentence reaches the threshold (``COPILOT_GROUNDING_THRESHOLD``, calibrated by the same
command).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from nltk.stem import PorterStemmer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from copilot.embeddings import Embedder
from copilot.types import Grounding, GroundingEvidence, RetrievedItem, SentenceSupport

# The support curve P(supported | cosine, term coverage), fitted on ScholarQA-Multi expert answers against their
# own snippets and against another question's (``python -m copilot.tools.calibration grounding`` prints them).
SUPPORT_COSINE_WEIGHT = 11.26
SUPPORT_COVERAGE_WEIGHT = 5.49
SUPPORT_BIAS = -7.13
# Sources of one answer are read as at most this many sentences (taken in turn from each source), so the cost of
# the check stays one small embedding batch however long the sources are.
MAX_SOURCE_SENTENCES = 64
MIN_SOURCE_SENTENCE_WORDS = 3

# Abbreviations a sentence does not end at (Punkt's own list, without training data).
_ABBREVIATIONS = {"e.g", "i.e", "et al", "al", "etc", "cf", "vs", "fig", "figs", "eq", "eqs", "sec", "tab", "no",
                  "dr", "prof", "approx", "resp", "ref", "refs", "u.s", "u.k", "ch", "vol", "pp", "p", "ca"}
_CITATION = re.compile(r"\s*\[\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\]")
_LEADING_CITATIONS = re.compile(r"^(?:\s*\[\d{1,3}(?:\s*[,–-]\s*\d{1,3})*\])+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")
_TERM = re.compile(r"\d+(?:[.,]\d+)*%?|[^\W\d_][\w]*(?:[-'][^\W_]+)*")


@lru_cache(maxsize=1)
def _splitter() -> PunktSentenceTokenizer:
    parameters = PunktParameters()
    parameters.abbrev_types = set(_ABBREVIATIONS)
    return PunktSentenceTokenizer(parameters)


@lru_cache(maxsize=1)
def _stemmer() -> PorterStemmer:
    return PorterStemmer()


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``: lines apart (paragraphs, list items), then Punkt's sentence
    boundaries, which keep "e.g.", "et al." and decimals whole; citation markers after a full stop ("... end. [2]")
    stay with the sentence they follow. Bullets and surrounding space are left out of a span."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        bullet = _BULLET.match(line)
        skip = bullet.end() if bullet else 0
        for start, end in _splitter().span_tokenize(line[skip:]):
            start, end = start + offset + skip, end + offset + skip
            lead = _LEADING_CITATIONS.match(text[start:end])
            if lead and spans:
                spans[-1] = (spans[-1][0], start + lead.end())
                start += lead.end()
                while start < end and text[start].isspace():
                    start += 1
            if text[start:end].strip():
                spans.append((start, end))
        offset += len(line)
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[s:e] for s, e in sentence_spans(text)]


def unfinished(sentence: str) -> bool:
    """Does ``sentence`` stop before its end (no closing punctuation), as the last one of a capped answer does?"""
    return not re.search(r"[.!?:;)\]\"'”]$", sentence.rstrip())


def strip_citations(text: str) -> str:
    """``text`` without its citation markers ("[2]", "[1, 3]"), as the embedder and the term match read it."""
    return " ".join(_CITATION.sub("", text).split())


def terms(text: str) -> set[str]:
    """The content terms of ``text``: numbers as written, other words lower-cased and stemmed, stop words and
    single letters left out."""
    stem = _stemmer().stem
    out = set()
    for token in _TERM.findall(text.lower()):
        if token[0].isdigit():
            out.add(token.rstrip("%").replace(",", ""))
        elif len(token) > 1 and token not in ENGLISH_STOP_WORDS:
            out.add(stem(token))
    return out


def source_sentences(sources: Sequence[str], cap: int = MAX_SOURCE_SENTENCES) -> list[tuple[int, str]]:
    """(source index, sentence) for the sentences of each source worth matching, taken in turn from each source
    so every source is read when the cap is reached; a source with no such sentence counts as one."""
    per_source = []
    for text in sources:
        sentences = [s for s in (" ".join(x.split()) for x in split_sentences(text or ""))
                     if len(s.split()) >= MIN_SOURCE_SENTENCE_WORDS]
        per_source.append(sentences or ([" ".join(text.split())] if text and text.strip() else []))
    out: list[tuple[int, str]] = []
    depth = 0
    while len(out) < cap and any(depth < len(s) for s in per_source):
        for j, sentences in enumerate(per_source):
            if depth < len(sentences) and len(out) < cap:
                out.append((j, sentences[depth]))
        depth += 1
    return out


def evidence(sentences: Sequence[str], sources: Sequence[str], embedder: Embedder,
             cap: int = MAX_SOURCE_SENTENCES) -> GroundingEvidence:
    """The evidence for every answer sentence (citation markers already stripped) against every source."""
    n, m = len(sentences), len(sources)
    cosine, coverage = np.zeros((n, m), dtype=np.float32), np.zeros((n, m), dtype=np.float32)
    quotes = [[""] * m for _ in range(n)]
    pieces = source_sentences(sources, cap)
    if not n or not pieces:
        return GroundingEvidence(cosine, coverage, quotes)
    vectors = embedder.encode_documents([*sentences, *(s for _, s in pieces)])
    similarity = vectors[:n] @ vectors[n:].T  # (sentences, source sentences)
    owner = np.array([j for j, _ in pieces])
    cosine.fill(-1.0)
    for j in set(owner.tolist()):
        columns = np.flatnonzero(owner == j)
        best = columns[np.argmax(similarity[:, columns], axis=1)]
        cosine[:, j] = similarity[np.arange(n), best]
        for i in range(n):
            quotes[i][j] = pieces[best[i]][1]
    # Rare terms weigh most: IDF over the source sentences, a term no source sentence holds weighing the most.
    piece_terms = [terms(s) for _, s in pieces]
    frequency: dict[str, int] = {}
    for found in piece_terms:
        for term in found:
            frequency[term] = frequency.get(term, 0) + 1
    source_terms = [terms(text or "") for text in sources]  # the whole source, beyond the sentences the cap kept
    total = len(pieces)
    for i, sentence in enumerate(sentences):
        wanted = terms(sentence)
        if not wanted:
            coverage[i, :] = 1.0  # nothing a source could fail to contain
            continue
        weight = {t: math.log((1 + total) / (1 + frequency.get(t, 0))) + 1.0 for t in wanted}
        whole = sum(weight.values())
        for j in range(m):
            coverage[i, j] = sum(w for t, w in weight.items() if t in source_terms[j]) / whole
    return GroundingEvidence(cosine, coverage, quotes)


def support_score(cosine: float | np.ndarray, coverage: float | np.ndarray, *,
                  weights: tuple[float, float, float] | None = None) -> np.ndarray:
    """P(supported | cosine, coverage) on the fitted curve; ``weights`` (cosine, coverage, bias) default to the
    shipped ones."""
    a, b, c = weights or (SUPPORT_COSINE_WEIGHT, SUPPORT_COVERAGE_WEIGHT, SUPPORT_BIAS)
    return 1.0 / (1.0 + np.exp(-(a * np.asarray(cosine) + b * np.asarray(coverage) + c)))


def check(answer: str, items: Sequence[RetrievedItem], embedder: Embedder, threshold: float, *,
          capped: bool = False) -> Grounding:
    """The grounding of ``answer`` against ``items``, the sources it was written from in their citation order.
    ``capped``: the answer stopped at its token cap, so an unfinished last sentence is a fragment, not checked."""
    spans = [(s, e) for s, e in sentence_spans(answer) if strip_citations(answer[s:e])]
    if capped and len(spans) > 1 and unfinished(strip_citations(answer[spans[-1][0]:spans[-1][1]])):
        spans = spans[:-1]  # the answer hit its token cap mid-sentence: a fragment states nothing to check yet
    sentences = [strip_citations(answer[s:e]) for s, e in spans]
    found = evidence(sentences, [item.text for item in items], embedder)
    supports = support_score(found.cosine, found.coverage) if items else np.zeros((len(spans), 0))
    out = []
    for i, (start, end) in enumerate(spans):
        if supports.shape[1] == 0 or not any(item.text for item in items):
            out.append(SentenceSupport(answer[start:end], 0.0, None, "", start, end))
            continue
        j = int(np.argmax(supports[i]))
        out.append(SentenceSupport(answer[start:end], round(float(supports[i, j]), 3), j + 1, found.quotes[i][j],
                                   start, end))
    grounded = bool(out) and all(s.support >= threshold for s in out)
    return Grounding(out, grounded, threshold)


def markdown(answer: str, grounding: Grounding) -> str:
    """The answer as the chat shows it: unsupported sentences marked (⚠️) where they stand, then each sentence's
    supporting quote; an answer none of whose sentences is supported says so plainly first, then shows the
    closest passages."""
    if not grounding.sentences:
        return answer
    weak = [s.support < grounding.threshold for s in grounding.sentences]
    marked, cursor = [], 0
    for s, unsupported in zip(grounding.sentences, weak, strict=True):
        marked.append(answer[cursor:s.start] + answer[s.start:s.end] + (" ⚠️" if unsupported else ""))
        cursor = s.end
    body = "".join(marked) + answer[cursor:]
    if all(weak):
        passages = sorted({(s.source_n or 0, s.quote) for s in grounding.sentences if s.quote})
        listing = "\n".join(f"- [{n}] {_quote(q)}" for n, q in passages)
        return ("**The sources do not support this answer.** Read it as unchecked.\n\n" + body
                + ("\n\n**Closest passages**\n" + listing if listing else ""))
    note = (f"\n\n⚠️ {sum(weak)} of {len(weak)} sentences are not supported by the sources." if any(weak) else "")
    numbered = enumerate(zip(grounding.sentences, weak, strict=True), start=1)
    listing = "\n".join(f"{k}. {'⚠️ ' if unsupported else ''}[{s.source_n}] {_quote(s.quote)} "
                        f"(support {s.support:.2f})" for k, (s, unsupported) in numbered if s.quote)
    return body + note + ("\n\n**Supporting quotes**\n" + listing if listing else "")


def _quote(text: str, limit: int = 300) -> str:
    """A source sentence as an inline quote, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[:limit - 1].rstrip() + '…'}”"
