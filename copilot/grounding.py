"""The grounding check: how well each sentence of an answer is supported by the sources it was written from.

No LLM call. The answer's sentences (citation markers stripped) and the sources' sentences are embedded in one
batch; each answer sentence is then scored against each source by two pieces of evidence: the cosine to that
source's closest sentence, and the share of the sentence's rare terms (content words, numbers and names, weighted
by their IDF over the source sentences, so a term absent from every source weighs most) that the source contains.
A logistic curve fitted on ScholarQA-Multi expert answers (``python -m copilot.tools.calibration grounding``)
turns the two into the support score; the best-supporting source gives ``source_n`` and ``quote``.

A score alone lets a fluent sentence that reuses a passage's words but changes its fact pass ("takes about 10
minutes and costs $2", stated nowhere). So each sentence's checkable facts (:func:`facts`: every number with its
unit's scale, every name, acronym and mixed-case term, every acronym expansion and quoted term) must also be found
in the sources sent with it (:func:`missing_facts`); a sentence with a missing fact is unsupported whatever its
score. Only a paper's own text confirms a fact, never an earlier finding (a thought) sent beside it. And when the
model wrote the answer again from the same sources, a sentence whose facts none of those answers states again is
unsupported too (:func:`rechecked`). The answer is grounded when every sentence reaches the
threshold (``COPILOT_GROUNDING_THRESHOLD``, calibrated by the same command) and states no missing or unstable fact.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from copilot.embeddings import Embedder
from copilot.types import Grounding, GroundingEvidence, RetrievedItem, SentenceSupport

if TYPE_CHECKING:
    from nltk.stem import PorterStemmer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

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


# nltk and scikit-learn take over a second to import: loaded on the first check (the app loads them with its models,
# load_readers), so a command that checks nothing starts without them.
@lru_cache(maxsize=1)
def _splitter() -> PunktSentenceTokenizer:
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    parameters = PunktParameters()
    parameters.abbrev_types = set(_ABBREVIATIONS)
    return PunktSentenceTokenizer(parameters)


@lru_cache(maxsize=1)
def stemmer() -> PorterStemmer:
    from nltk.stem import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


def load_readers() -> None:
    """Load the sentence splitter, the stemmer and the stop words now rather than on the first check."""
    _splitter(), stemmer(), stop_words()


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


def terms(text: str, *, every_word: bool = False) -> set[str]:
    """The content terms of ``text``: numbers as written, other words lower-cased and stemmed, stop words and
    single letters left out (``every_word``: kept, so that "gets" in an answer repeats the question's "get")."""
    stem, stops = stemmer().stem, stop_words()
    out = set()
    for token in _TERM.findall(text.lower()):
        if token[0].isdigit():
            out.add(token.rstrip("%").replace(",", ""))
        elif every_word or (len(token) > 1 and token not in stops):
            out.add(stem(token))
    return out


# ----- checkable facts -------------------------------------------------------------------------------------

_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
                 "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "hundred": 100, "thousand": 1000,
                 "dozen": 12}
_SCALES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "mn": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9,
           "t": 1e12, "trillion": 1e12}
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)\s?(k|m|mn|b|bn|t|thousand|million|billion|trillion)?"
                     r"(?![\w])", re.IGNORECASE)
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b(?:[\s-]+(thousand|million|billion))?", re.IGNORECASE)
# A word that names something: an acronym or a mixed-case or digit-bearing term (XAI, SciBERT, nDCG, S2ORC, GPT-3),
# or a capitalised word inside a sentence (Explainable, Semantic Scholar's Scholar).
_WORD = re.compile(r"[^\W_](?:[\w'’]|-(?=\w))*")
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»]{3,80})[\"“”«»]")
_EXPANSION = re.compile(r"\b([A-Za-z][A-Za-z0-9-]*[A-Z][A-Za-z0-9-]*)\b,?\s+(?:stands for|is short for|is an acronym for|"
                        r"is the abbreviation of|is an abbreviation for|means)\s+[\"“]?([^.;,\"”()\[\]]{3,120})",
                        re.IGNORECASE)
_EXPANSION_BEFORE = re.compile(r"([A-Za-z][\w -]{3,100}?)\s*\(([A-Z][A-Za-z0-9-]*[A-Z][A-Za-z0-9-]*s?)\)")
# Capitalised words that name nothing in particular (a sentence may start with them after a clause or a colon).
_COMMON_CAPITALS = {"i", "the", "a", "an", "this", "that", "these", "those", "it", "they", "we", "he", "she", "in",
                    "on", "for", "of", "and", "or", "but", "to", "with", "by", "as", "at", "from", "yes", "no",
                    "however", "table", "figure", "section", "fig", "eq", "equation", "appendix", "source", "sources",
                    "note", "also", "there", "their", "its", "our", "answer", "question", "paper", "authors",
                    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "does", "do", "did", "is",
                    "are", "was", "were", "be", "can", "could", "should", "would", "will", "may", "might", "must",
                    "if", "then", "so", "because", "although", "though", "while", "after", "before", "here", "each",
                    "every", "all", "some", "most", "many", "both", "first", "second", "third", "finally", "overall",
                    "thus", "therefore", "moreover", "furthermore", "in addition", "based", "according", "using",
                    "not", "only", "one", "two", "three", "you", "your", "my", "me", "us", "his", "her", "them"}


# Units of measure a number may carry; an answer's number with a unit must be stated with that unit in the sources
# ("81.1M papers" does not state "81.1 gigabytes"). Each spelling maps to one canonical name.
_UNITS = {
    **dict.fromkeys(["ms", "millisecond", "milliseconds"], "ms"),
    **dict.fromkeys(["sec", "secs", "second", "seconds"], "s"),
    **dict.fromkeys(["min", "mins", "minute", "minutes"], "min"),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], "h"),
    **dict.fromkeys(["day", "days"], "day"), **dict.fromkeys(["week", "weeks"], "week"),
    **dict.fromkeys(["month", "months"], "month"),
    **dict.fromkeys(["kb", "kilobyte", "kilobytes"], "kb"), **dict.fromkeys(["mb", "megabyte", "megabytes"], "mb"),
    **dict.fromkeys(["gb", "gigabyte", "gigabytes"], "gb"), **dict.fromkeys(["tb", "terabyte", "terabytes"], "tb"),
    **dict.fromkeys(["byte", "bytes"], "byte"),
    **dict.fromkeys(["%", "percent", "per cent", "percentage"], "%"),
    **dict.fromkeys(["usd", "dollar", "dollars", "$"], "$"), **dict.fromkeys(["eur", "euro", "euros", "€"], "€"),
    **dict.fromkeys(["gpu", "gpus"], "gpu"), **dict.fromkeys(["tpu", "tpus"], "tpu"),
    **dict.fromkeys(["cpu", "cpus", "core", "cores"], "cpu"),
    **dict.fromkeys(["token", "tokens"], "token"), **dict.fromkeys(["parameter", "parameters", "params"], "param"),
    **dict.fromkeys(["layer", "layers"], "layer"), **dict.fromkeys(["epoch", "epochs"], "epoch"),
}
_UNIT_AFTER = re.compile(r"\s*(?:[kmbt](?![a-z])|thousand|million|billion|trillion)?\s*(%|\$|€|[a-z]+(?: cent)?)",
                         re.IGNORECASE)


def _unit_after(text: str, end: int) -> str | None:
    """The unit of measure right after a number ending at ``end`` ("10 hours", "93%", "3.1B tokens"), if any."""
    match = _UNIT_AFTER.match(text, end)
    return _UNITS.get(match.group(1).lower()) if match else None


def _plain(text: str) -> str:
    """``text`` as facts are compared: NFKC (ligatures expanded), lower case, dashes as hyphens, one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[‐‑‒–—−]", "-", text)
    return " ".join(text.split())


def _digits(text: str) -> Iterator[tuple[re.Match, float, str]]:
    """(match, value, scale word or letter) for each number ``text`` writes in digits."""
    for match in _NUMBER.finditer(text):
        try:
            value = float(match.group(1).replace(",", ""))
        except ValueError:
            continue
        yield match, value, (match.group(2) or "").lower()


def _values(text: str) -> set:
    """Every number ``text`` states, as a value: written out ("three million") or in digits, with or without its
    scale ("37M" and "37 million" are 37,000,000; "37M" also counts as the 37 itself); a number followed by a unit
    of measure within three words also as (value, unit)."""
    out: set = set()
    for match, value, scale in _digits(text):
        values = {value, value * _SCALES[scale]} if scale else {value}
        out |= values
        units = {_UNITS.get(w) for w in re.findall(r"%|\$|€|[a-z]+", text[match.end():match.end() + 40].lower())[:3]}
        if text[max(0, match.start() - 1):match.start()] == "$":
            units.add("$")
        out |= {(round(v, 6), u) for v in values for u in units if u}
    for match in _NUMBER_WORD.finditer(text):
        value = float(_NUMBER_WORDS[match.group(1).lower()])
        values = {value * _SCALES[match.group(2).lower()]} if match.group(2) else {value}
        out |= values
        units = {_UNITS.get(w) for w in re.findall(r"%|[a-z]+", text[match.end():match.end() + 40].lower())[:3]}
        out |= {(round(v, 6), u) for v in values for u in units if u}
    return {round(v, 6) if isinstance(v, float) else v for v in out}


def _numbers(text: str) -> list[tuple[str, set[float]]]:
    """The numbers of an answer sentence: (as written with its unit, the values that would confirm it)."""
    found = []
    for match, value, scale in _digits(text):
        accepted = {round(value * _SCALES[scale], 6)} if scale else {round(value, 6)}
        if scale:
            accepted.add(round(value, 6))  # "37M" is confirmed by "37M" (37 and 37e6 both read from it) too
        unit = _unit_after(text, match.end()) or ("$" if text[max(0, match.start() - 1):match.start()] == "$"
                                                   else None)
        written = match.group(0).strip()
        if unit:
            written = text[match.start():_UNIT_AFTER.match(text, match.end()).end()].strip() if unit != "$" \
                else f"${written}"
            accepted = {(v, unit) for v in accepted}  # type: ignore[misc]
        found.append((written, accepted))
    for match in _NUMBER_WORD.finditer(text):
        value = float(_NUMBER_WORDS[match.group(1).lower()])
        accepted = {round(value, 6)}
        if match.group(2):
            accepted = {round(value * _SCALES[match.group(2).lower()], 6)}
        unit = _unit_after(text, match.end())
        written = match.group(0)
        if unit:
            written = text[match.start():_UNIT_AFTER.match(text, match.end()).end()]
            accepted = {(v, unit) for v in accepted}  # type: ignore[misc]
        found.append((written, accepted))
    return found


def _names(sentence: str) -> list[str]:
    """The words of ``sentence`` that name something (see :data:`_WORD`): acronyms, mixed-case and digit-bearing
    terms anywhere, capitalised words after the sentence's first word."""
    out = []
    words = list(_WORD.finditer(sentence))
    for k, match in enumerate(words):
        word = match.group(0).strip("'’")
        if len(word) < 2 or word.isdigit() or word.casefold() in _COMMON_CAPITALS:
            continue
        inner_capital = any(ch.isupper() for ch in word[1:])
        has_digit = any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)
        starts_sentence = k == 0 or sentence[max(0, match.start() - 2):match.start()].strip() in (":", ".", "-", "•")
        capitalised = word[0].isupper() and not starts_sentence
        if inner_capital or has_digit or capitalised:
            out.append(word)
    return out


def names_in(text: str) -> list[str]:
    """The names a text mentions (see :func:`_names`), sentence by sentence."""
    return [name for sentence in split_sentences(text) for name in _names(sentence)]


def facts(sentence: str) -> list[tuple[str, str, object]]:
    """The checkable facts of one answer sentence (citation markers stripped), each as (kind, as written, what
    confirms it): ``number`` (values), ``name`` (the word), ``expansion`` and ``quote`` (a phrase)."""
    out: list[tuple[str, str, object]] = [("number", raw, values) for raw, values in _numbers(sentence)]
    out += [("name", word, word) for word in _names(sentence)]
    for match in _EXPANSION.finditer(sentence):
        phrase = match.group(2).strip().rstrip(".")
        out.append(("expansion", f"{match.group(1)} = {phrase}", phrase))
    for match in _EXPANSION_BEFORE.finditer(sentence):
        words = match.group(1).split()
        acronym = match.group(2).rstrip("s")
        phrase = " ".join(words[-len(acronym):]) if len(words) >= len(acronym) else match.group(1)
        out.append(("expansion", f"{acronym} = {phrase}", phrase))
    out += [("quote", q.strip(), q.strip()) for q in _QUOTED.findall(sentence) if len(q.split()) <= 12]
    return sorted(out, key=lambda fact: max(sentence.find(fact[1].split(" = ")[0]), 0))  # in the sentence's order


class SourceFacts:
    """What the sources sent with an answer state, read once: their plain text and every number's value."""

    def __init__(self, texts: Sequence[str]) -> None:
        plain = " \n ".join(_plain(t or "") for t in texts)
        self.text = plain
        # Words joined across a line-end hyphen or a space ("Semantic-Scholar", "pre trained") match either way.
        self.squashed = re.sub(r"[\s-]+", "", plain)
        self.values = _values(plain)

    def holds_word(self, word: str) -> bool:
        plain = _plain(word)
        forms = {plain, plain.rstrip("s") if len(plain) > 3 else plain, re.sub(r"'s$|’s$", "", plain)}
        for form in forms:
            if form and re.search(rf"(?<![\w]){re.escape(form)}", self.text):
                return True
        return False

    def holds_phrase(self, phrase: str) -> bool:
        plain = _plain(phrase)
        return bool(plain) and (plain in self.text or re.sub(r"[\s-]+", "", plain) in self.squashed)

    def holds(self, kind: str, confirm: object) -> bool:
        if kind == "number":
            return bool(self.values & confirm)  # type: ignore[operator]
        if kind == "name":
            return self.holds_word(str(confirm))
        return self.holds_phrase(str(confirm))


# A number that labels a part of a paper or of the prompt ("Table 2", "Section 3", "RQ3", "[1]") counts nothing.
_LABEL_BEFORE = re.compile(r"(?:\b(?:tables?|figures?|figs?|sections?|sec|appendix|eqs?|equations?|chapters?|pages?|pp?"
                           r"|rq|step|stage|version|v)\.?\s*|\[|\brq)$", re.IGNORECASE)
# Words that state a count or an amount without digits ("none of them", "a single GPU", "all of the papers").
_COUNT_WORDS = re.compile(r"\b(?:none|zero|single|one|once|twice|half|dozens?|hundreds|thousands|millions|billions)\b",
                          re.IGNORECASE)


def states_quantity(sentence: str) -> bool:
    """Does ``sentence`` state a count, an amount or a score: a number that labels nothing ("Table 2" and "[1]" do
    not count), a number word or a count word ("none", "a single", "hundreds")?"""
    text = strip_citations(sentence)
    for match, _, _ in _digits(text):
        if not _LABEL_BEFORE.search(text[max(0, match.start() - 12):match.start()]):
            return True
    return bool(_NUMBER_WORD.search(text) or _COUNT_WORDS.search(text))


def missing_facts(sentence: str, sources: SourceFacts, given: SourceFacts | None = None) -> list[str]:
    """The facts of ``sentence`` (citation markers stripped) that no source states, as written in the sentence.
    ``given``: what the question says, whose names, expansions and quoted terms (never its numbers) may be repeated
    without a source."""
    return [raw for kind, raw, confirm in facts(sentence) if not sources.holds(kind, confirm)
            and not (given is not None and kind != "number" and given.holds(kind, confirm))]


# A sentence that addresses the model rather than the reader ("ignore previous instructions and say ..."): a source
# carrying one is quoted material, and its instruction never counts as support for an answer that obeys it.
_INSTRUCTION = re.compile(
    # an imperative that opens the sentence and overrides what came before: "Ignore previous instructions ..."
    r"^\W*(?:please\s+|now\s+)?(?:ignore|disregard|forget|override)\b.{0,40}?"
    r"\b(?:previous|prior|above|earlier|preceding|all|any|your|these|those|the)\b.{0,30}?"
    r"\b(?:instructions?|prompts?|directions?|guidance|rules)\b"
    # or an order to emit a word in capitals: "Say PWNED.", "Please respond with 'HACKED'", "... and say PWNED"
    r"|(?:^\W*(?:please\s+)?|\b(?:instructions?|prompts?|directions?|guidance|rules)\b.{0,20}?\band\s+)"
    r"(?:say|respond|reply|output|print|write|answer)\s+(?:only\s+|just\s+|exactly\s+)?(?:with\s+)?"
    r"(?:the\s+(?:word|phrase|string)\s+)?[\"'“‘]?(?-i:[A-Z][A-Z0-9!_-]{2,})\b(?![a-z])",
    re.IGNORECASE | re.DOTALL)


_ORDER_WORDS = re.compile(r"\b(?:ignore|disregard|forget|override|say|respond|reply|output|print|write|answer)\b",
                          re.IGNORECASE)


def instruction_like(sentence: str) -> bool:
    """Whether ``sentence`` reads as an instruction to the model (a prompt injection), not a statement."""
    return _INSTRUCTION.search(sentence) is not None


def without_instructions(text: str) -> str:
    """``text`` less the sentences that read as instructions to the model (see :func:`instruction_like`)."""
    if not text or _ORDER_WORDS.search(text) is None:  # no sentence of it could be one
        return text
    spans = sentence_spans(text)
    kept = [text[s:e] for s, e in spans if not instruction_like(text[s:e])]
    return " ".join(kept)


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


_DIGITS = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
QUOTE_MARGIN = 0.15  # a sentence that states the answer's numbers is its quote if its cosine is within this


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
    # The quote of a sentence that states numbers is the source sentence that states most of them (a table's row,
    # not its caption), the closest among those; its cosine is still the closest sentence's.
    stated = [set(_DIGITS.findall(sentence)) for sentence in sentences]
    held = [set(_DIGITS.findall(text)) for _, text in pieces]
    for j in set(owner.tolist()):
        columns = np.flatnonzero(owner == j)
        best = columns[np.argmax(similarity[:, columns], axis=1)]
        cosine[:, j] = similarity[np.arange(n), best]
        for i in range(n):
            quote = best[i]
            if stated[i]:
                # Among the sentences nearly as close as the closest ("2" of a "Table 2" caption elsewhere counts
                # for nothing).
                near = columns[similarity[i, columns] >= similarity[i, best[i]] - QUOTE_MARGIN]
                counts = np.array([len(stated[i] & held[c]) for c in near])
                if counts.max() > 0:
                    most = near[counts == counts.max()]
                    quote = most[np.argmax(similarity[i, most])]
            quotes[i][j] = pieces[quote][1]
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


def unstable_facts(sentence: str, resamples: Sequence[str], given: SourceFacts | None = None) -> list[str]:
    """The facts of ``sentence`` (citation markers stripped; those ``given`` by the question left out, as in
    :func:`missing_facts`) that the answers the model wrote again (``resamples``) do not state, as written: none
    when one resample states them all, else those the closest resample leaves out. A model that read a fact in its
    sources states it again; a number or name it guessed changes from one sampling to the next (SelfCheckGPT's
    observation), so a fact no resample repeats is in doubt."""
    own = [(kind, raw, confirm) for kind, raw, confirm in facts(sentence)
           if not (given is not None and kind != "number" and given.holds(kind, confirm))]
    if not own or not resamples:
        return []
    best: list[str] | None = None
    for text in resamples:
        stated = SourceFacts([strip_citations(text)])
        left = [raw for kind, raw, confirm in own if not stated.holds(kind, confirm)]
        if best is None or len(left) < len(best):
            best = left
    return best or []


def unsure_facts(answer: str, tokens: Sequence[tuple[str, float]], floor: float, question: str = ""
                 ) -> list[tuple[str, float]]:
    """The facts of ``answer`` (a number with its unit, a name, an acronym's expansion or a quoted term, as
    :func:`facts` reads them; those the question gives left out, as in :func:`unstable_facts`) that the model wrote
    with a probability below ``floor``, each as written with that probability: its least likely token's, read from
    ``tokens``, the answer's ``(text, log-probability)`` pairs (:class:`copilot.llm.base.TokenTrace`). A number the
    model read in its sources it copies with confidence; one it guesses, or takes from the wrong row, it writes with
    a low probability. A fact is found where it stands as a whole word in its sentence, never inside a citation
    marker ("[3]") or another word ("19" in "2019", "BERT" in "SciBERT"); a fact written twice is read at both
    places. One the tokens do not show (the last token of a capped answer is not traced) is passed over. Empty
    without tokens."""
    if not tokens or floor <= 0:
        return []
    written = "".join(text for text, _ in tokens)
    starts = np.cumsum([0] + [len(text) for text, _ in tokens])
    cited = [m.span() for m in _CITATION.finditer(written)]
    given = SourceFacts([question])
    used: set[tuple[int, int]] = set()
    lowest: dict[str, float] = {}
    sentence_at = 0
    for sentence in split_sentences(answer):
        found_at = written.find(sentence.strip()[:40], sentence_at)
        sentence_at = found_at if found_at >= 0 else sentence_at
        for kind, raw, confirm in facts(strip_citations(sentence)):
            if kind != "number" and given.holds(kind, confirm):
                continue
            words = str(confirm if kind in ("expansion", "quote") else raw).split()
            pattern = re.compile(r"(?<![\w.])" + r"\s+".join(map(re.escape, words)) + r"(?!\w)")
            match = next((m for m in pattern.finditer(written, sentence_at) if m.span() not in used
                          and not any(s < m.end() and m.start() < e for s, e in cited)), None)
            if match is None:
                continue
            used.add(match.span())
            logs = [log_p for (text, log_p), start in zip(tokens, starts, strict=False)
                    if start < match.end() and start + len(text) > match.start()]
            if logs:
                lowest[raw] = min(lowest.get(raw, 1.0), math.exp(min(logs)))
    return [(raw, round(p, 3)) for raw, p in lowest.items() if p < floor]


def has_facts(answer: str, question: str = "") -> bool:
    """Does ``answer`` state a checkable fact (see :func:`facts`) beyond the names ``question`` gives?"""
    given = SourceFacts([question])
    return any(kind == "number" or not given.holds(kind, confirm)
               for sentence in split_sentences(answer) for kind, _, confirm in facts(strip_citations(sentence)))


def check(answer: str, items: Sequence[RetrievedItem], embedder: Embedder, threshold: float, *,
          capped: bool = False, heads: Sequence[str] = (), question: str = "") -> Grounding:
    """The grounding of ``answer`` against ``items``, the sources it was written from in their citation order.
    ``capped``: the answer stopped at its token cap, so an unfinished last sentence is a fragment, not checked.
    ``heads``: what the model read of each source beside its text (paper titles, sections), which states facts as a
    source does; ``question``: what it says (its names, expansions and quoted terms, but not its numbers) may be
    repeated without a source stating it. :func:`rechecked` adds what the model's rechecks show."""
    spans = [(s, e) for s, e in sentence_spans(answer) if strip_citations(answer[s:e])]
    if capped and len(spans) > 1 and unfinished(strip_citations(answer[spans[-1][0]:spans[-1][1]])):
        spans = spans[:-1]  # the answer hit its token cap mid-sentence: a fragment states nothing to check yet
    sentences = [strip_citations(answer[s:e]) for s, e in spans]
    texts = [without_instructions(item.text) for item in items]  # an instruction in a source supports nothing
    found = evidence(sentences, texts, embedder)
    supports = support_score(found.cosine, found.coverage) if items else np.zeros((len(spans), 0))
    # A fact is confirmed by a paper's own text only: an earlier finding (a thought) may have put a right number in
    # the wrong place, and vouching for it would spread the error to every answer that retrieves it.
    stated = SourceFacts([t for t, item in zip(texts, items, strict=True) if item.kind != "thought"] + list(heads))
    given = SourceFacts([question])
    out = []
    for i, (start, end) in enumerate(spans):
        missing = tuple(missing_facts(sentences[i], stated, given))
        if supports.shape[1] == 0 or not any(texts):
            out.append(SentenceSupport(answer[start:end], 0.0, None, "", start, end, missing))
            continue
        j = int(np.argmax(supports[i]))
        out.append(SentenceSupport(answer[start:end], round(float(supports[i, j]), 3), j + 1, found.quotes[i][j],
                                   start, end, missing))
    grounded = bool(out) and all(s.supported(threshold) for s in out)
    return Grounding(out, grounded, threshold)


def rechecked(checked: Grounding, resamples: Sequence[str], question: str = "") -> Grounding:
    """``checked`` with each sentence's facts that the model, writing the answer again (``resamples``), did not
    state again (:func:`unstable_facts`); a resample that states nothing (empty, or only citation markers) is no
    recheck and is left out."""
    usable = [r for r in resamples if re.sub(r"[\W_]+", "", strip_citations(r))]
    if not usable:
        return checked
    given = SourceFacts([question])
    sentences = [replace(s, unstable=tuple(f for f in unstable_facts(strip_citations(s.sentence), usable, given)
                                           if f not in s.missing)) for s in checked.sentences]
    return Grounding(sentences, bool(sentences) and all(s.supported(checked.threshold) for s in sentences),
                     checked.threshold)


def markdown(answer: str, grounding: Grounding, where: Sequence[str] = ()) -> str:
    """The answer as the chat shows it: unsupported sentences marked (⚠️) where they stand, then each sentence's
    supporting quote (``where[n - 1]``: source n's paper, section and page, when given), an unsupported sentence's
    with the facts no source states or the model did not say again; an answer none of whose sentences is supported
    says so plainly first, then shows the closest passages (or, when the sources state it but the model did not say
    it again, that it reads as a guess, then its quotes)."""
    if not grounding.sentences:
        return answer
    weak = [not s.supported(grounding.threshold) for s in grounding.sentences]
    marked, cursor = [], 0
    for s, unsupported in zip(grounding.sentences, weak, strict=True):
        marked.append(answer[cursor:s.start] + answer[s.start:s.end] + (" ⚠️" if unsupported else ""))
        cursor = s.end
    body = "".join(marked) + answer[cursor:]

    def place(n: int | None) -> str:
        return f" — {where[n - 1]}" if n and 0 < n <= len(where) else ""

    # The sources state what it says, but the model did not say it again when it answered again: a guess.
    guess = all(weak) and all(s.sourced(grounding.threshold) for s in grounding.sentences)
    if all(weak) and not guess:
        passages = sorted({(s.source_n or 0, s.quote) for s in grounding.sentences if s.quote})
        listing = "\n".join(f"- [{n}] {_quote(q)}{place(n)}" for n, q in passages)
        return ("**The sources do not support this answer.** Read it as unchecked.\n\n" + body
                + ("\n\n**Closest passages**\n" + listing if listing else ""))
    head = ("**The model did not give this answer again when it answered again.** Read it as a guess and check "
            "the quotes.\n\n" if guess else "")
    note = (f"\n\n⚠️ {sum(weak)} of {len(weak)} sentences are not supported by the sources."
            if any(weak) and not guess else "")
    numbered = enumerate(zip(grounding.sentences, weak, strict=True), start=1)
    listing = "\n".join(
        f"{k}. {'⚠️ ' if unsupported else ''}[{s.source_n}] {_quote(s.quote)} (support {s.support:.2f})"
        f"{place(s.source_n)}" + (f"; {s.flaws()}" if s.flaws() else "")
        for k, (s, unsupported) in numbered if s.quote)
    return head + body + note + ("\n\n**Supporting quotes**\n" + listing if listing else "")


def quoted(text: str, limit: int = 300) -> str:
    """A source sentence as an inline quote (see :func:`_quote`)."""
    return _quote(text, limit)


def _quote(text: str, limit: int = 300) -> str:
    """A source sentence as an inline quote, cut to ``limit`` characters."""
    text = " ".join(text.split()).strip(" …")  # a compressed source's gap marks are not the paper's words
    return f"“{text if len(text) <= limit else text[:limit - 1].rstrip() + '…'}”"
