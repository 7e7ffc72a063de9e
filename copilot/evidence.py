"""The evidence an answer is written from: wide retrieval compressed to the sentences that bear on the question.

Retrieval (:func:`copilot.retrieval.retrieve_mixture`) finds candidates from both indices, dense and lexical, fused
into one ranking. Packing whole chunks into a small model's context budget sends two or three chunks, and the
sentence that holds the answer is often in the fourth. So the first :data:`CANDIDATES` candidates (near-duplicates
skipped) are cut into sentences and every sentence is scored against the question, the way RECOMP's extractive
compressor does, with the embedder the copilot already has:

- its cosine to the question's embedding;
- the share of the question's rare terms it holds (stems and numbers, each weighted by its IDF over all candidate
  sentences, so "XAI" or "GPU" weighs much more than "paper" or "use");
- a small prior for the rank of the candidate it came from (hybrid retrieval's own judgement).

A question term of a paper's title ("SPECTER") counts as held by every sentence of that paper: the model reads each
source with its title, and the terms that tell the paper's sentences apart ("implemented") decide. A table row
("Neural 84.6 85.8") is read under its header row and under the caption ("Table 4: The Bag of Concepts F1 score
...") found among the candidates on its page, else the page before or after: it takes their cosine (less
:data:`CAPTION_DISCOUNT`) and terms, the caption's at half weight, so the row's own words still tell the rows apart;
a row sent goes with its header row, and with its caption when the budget allows.

A newly added paper's sentence vectors are read ahead (:meth:`SentenceVectors.warm`, batch by batch in the model's
background slots, so never while the model computes an answer), so its first questions embed none of them.

The best sentences are then kept greedily, then their neighbours in their chunk (an answer often runs over two
sentences), until the token budget is spent, and their sources are sent in retrieval's order; overlapping chunks
never send the same sentence twice. Each source sent to the model is one candidate's kept sentences in their order,
with "…" where sentences were left out, so every source sentence is still verbatim and can be quoted as evidence. A
thought is one sentence as a whole. A table read cell by cell is the exception: its rows are read (and sent, and
quoted) with each value after its column's name, "Dataset: BC5CDR; SciBERT Finetune: 90.01." (:func:`chunk_sentences`).

``bearing`` is how well the best sentence bears on the question; below :data:`MIN_BEARING` nothing in scope does,
and the question is declined without calling the model.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from threading import Lock

import numpy as np

from copilot.embeddings import Embedder
from copilot.grounding import split_sentences, terms
from copilot.types import RetrievedItem
from ingest.table_text import TABLE_CAPTION, cells, is_cell_table, read_table

CANDIDATES = 30  # retrieved items read sentence by sentence (the issue asks for 20-40)
LEXICAL_WEIGHT = 0.6  # a sentence's score: cosine + this x the IDF-weighted share of the question's terms it holds
# + this x the IDF-weighted share of the question's terms its whole candidate (chunk) holds: a sentence in a passage
# about the question's subject beats one that only shares a word with it.
CONTEXT_WEIGHT = 0.15
NEIGHBOURS = 1  # sentences kept on each side of a chosen one, within its chunk
MIN_SENTENCE_WORDS = 3
# A sentence of the reference list, or a fragment with fewer than three real words (a citation cut at a chunk's
# edge: ", 2018; Wang et al., 2019)."), rarely answers anything: it loses this much (table rows excepted).
REFERENCE_PENALTY = 0.3
FRAGMENT_PENALTY = 0.3
_REFERENCES = re.compile(r"^(references|bibliography|works cited)\b", re.IGNORECASE)
_REAL_WORD = re.compile(r"[^\W\d_]{3,}")
# A question that asks for a quantity ("how many", "what F1", "which learning rate") is answered by a sentence or a
# table row that states a number: such sentences get this much more.
NUMBER_BONUS = 0.2
_ASKS_NUMBER = re.compile(
    r"\b(how (many|much|big|large|long|often|fast|small)|what (percentage|fraction|proportion|share|number)|"
    r"number of|size|score[sd]?|f1|accuracy|precision|recall|bleu|rouge|auc|map|ndcg|rate|percent(age)?|average|"
    r"mean|median|ratio|count|value|correlation|kappa|agreement|threshold|dimension(s|ality)?|year|when)\b",
    re.IGNORECASE)
# A question that asks what an acronym stands for is answered where the acronym is defined: "Explainable artificial
# intelligence (XAI) is ..." or "XAI stands for ...". Such sentences get this much more.
DEFINITION_BONUS = 0.3
_ASKS_EXPANSION = re.compile(r"\b(stands? for|short for|acronym|abbreviat\w*|expan(sion|ded|d)|spelled out|"
                             r"what does (the )?\S+ mean)\b", re.IGNORECASE)
_ACRONYM = re.compile(r"\b([A-Za-z]*[A-Z][A-Za-z0-9-]*[A-Z0-9][A-Za-z0-9-]*)\b")
_CITES = re.compile(r"\([^()]*\b(?:19|20)\d\d[a-z]?\)|\[\d+(?:[,–-]\s*\d+)*\]")
_STATES_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?(?![\w])")
# Below this, nothing retrieved bears on the question: the best sentence neither resembles it (cosine) nor holds
# its rare terms. Checked on the QA benchmark's unanswerable and answerable questions (docs/trust.md, "Trust").
MIN_BEARING = 0.35
# A table row read under its header row or caption takes their cosine, less this (the row may not be the one asked).
CAPTION_DISCOUNT = 0.1
GAP = " … "
_CACHE_SIZE = 1024  # sentence vectors of this many chunks are kept between questions (about 12 MB)
WARM_BATCH = 16  # chunks whose sentences a newly added paper's warming embeds at a time


@dataclass
class Sentence:
    candidate: int  # index of the candidate (retrieved item) it comes from
    position: int  # its place among that candidate's sentences
    text: str
    tokens: int = 0
    score: float = 0.0


@dataclass
class Compressed:
    """The sources sent to the model (texts cut to their kept sentences), and how well the best bears on the
    question."""

    items: list[RetrievedItem]
    bearing: float
    candidates: int = 0
    sentences: int = 0  # sentences scored
    tokens: int = 0
    originals: list[str] = field(default_factory=list)  # each item's whole text, before it was cut


class SentenceVectors:
    """Sentence vectors of chunks, kept by chunk id between questions (a chunk's text never changes under its
    id): a second question about the same paper embeds only the sentences it has not seen."""

    def __init__(self, embedder: Embedder, size: int = _CACHE_SIZE) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._lock = Lock()

    def warm(self, chunks: Sequence[tuple[int, str]], *, batch: int = WARM_BATCH,
             before_batch: Callable[[], AbstractContextManager] | None = None) -> int:
        """Read the sentence vectors of ``chunks`` ((chunk id, text), at most the cache's size) into the cache,
        ``batch`` chunks at a time, each inside ``before_batch()`` when given (a background slot of the model, so
        warming never runs beside an answer); the number of chunks read."""
        chunks = [(cid, text) for cid, text in chunks if cid is not None][:self.size]
        for at in range(0, len(chunks), batch):
            part = chunks[at:at + batch]
            with before_batch() if before_batch is not None else nullcontext():
                self.vectors([("chunk", cid) for cid, _ in part], [chunk_sentences(text) for _, text in part])
        return len(chunks)

    def vectors(self, keys: Sequence[tuple[str, int] | None], groups: Sequence[list[str]]) -> list[np.ndarray]:
        """One (sentences, dim) array per group; a group with a key is read from the cache when it is there."""
        out: list[np.ndarray | None] = [None] * len(groups)
        missing: list[int] = []
        with self._lock:
            for i, key in enumerate(keys):
                hit = self._cache.get(key) if key is not None else None
                if hit is not None and len(hit) == len(groups[i]):
                    self._cache.move_to_end(key)
                    out[i] = hit
                else:
                    missing.append(i)
        texts = [s for i in missing for s in groups[i]]
        if texts:
            encoded = self.embedder.encode_documents(texts)
            at = 0
            with self._lock:
                for i in missing:
                    out[i] = encoded[at:at + len(groups[i])]
                    at += len(groups[i])
                    if keys[i] is not None:
                        self._cache[keys[i]] = out[i]
                        self._cache.move_to_end(keys[i])
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        dim = self.embedder.dimension if hasattr(self.embedder, "dimension") else 0
        return [o if o is not None else np.zeros((0, dim), dtype=np.float32) for o in out]


def _share(weight: dict[str, float], held: set[str], whole: float) -> float:
    """The IDF-weighted share of the question's terms that ``held`` holds."""
    return sum(w for t, w in weight.items() if t in held) / whole if whole else 0.0


def chunk_sentences(text: str) -> list[str]:
    """The sentences a chunk's text is read as (whitespace collapsed; the whole text when it has none). A Markdown
    table (a table read cell by cell: its caption, header and rows) is read as its caption, then one sentence a row
    that names each value's column (:func:`row_sentence`): a small model reads "SciBERT Finetune: 90.01" where it
    misreads the fifth cell of a row under a header."""
    table = read_table(text)
    if table is not None:
        names = cells(table.header)
        rows = [row_sentence(names, cells(line)) for line in table.rows]
        head = [" ".join(line.split()) for line in table.above if line.strip()]
        return [*head, *(r for r in rows if r)] or [" ".join(text.split())]
    sentences = [" ".join(s.split()) for s in split_sentences(text)]
    return [s for s in sentences if s] or [" ".join(text.split())]


def row_sentence(names: Sequence[str], cells: Sequence[str]) -> str:
    """A table row as one sentence, each value after its column's name: "Dataset: ChemProt; SOTA: 76.68;
    SciBERT Finetune: 83.64." (empty cells left out)."""
    parts = [f"{name}: {cell}" if name else cell
             for name, cell in zip([*names, *[""] * (len(cells) - len(names))], cells, strict=False) if cell]
    return "; ".join(parts) + "." if parts else ""


def _idf(sentence_terms: list[set[str]], wanted: set[str]) -> dict[str, float]:
    total = len(sentence_terms)
    frequency = {t: sum(1 for found in sentence_terms if t in found) for t in wanted}
    # A question term no candidate holds says nothing about which sentence to keep: weight 0.
    return {t: (math.log((1 + total) / (1 + f)) + 1.0) if f else 0.0 for t, f in frequency.items()}


def compress(question: str, query_vector: np.ndarray, candidates: Sequence[RetrievedItem], vectors: SentenceVectors,
             *, budget_tokens: int, count_tokens: Callable[[str], int], max_sources: int = 8,
             candidates_read: int = CANDIDATES, lexical_weight: float | None = None) -> Compressed:
    """The sentences of the first ``candidates_read`` candidates that bear most on ``question`` (with their
    neighbours), as at most ``max_sources`` sources within ``budget_tokens``; see the module's docstring."""
    lexical_weight = LEXICAL_WEIGHT if lexical_weight is None else lexical_weight
    pool = list(candidates[:candidates_read])
    groups = [[" ".join(item.text.split())] if item.kind == "thought" else chunk_sentences(item.text or "")
              for item in pool]
    keys = [(item.kind, item.id) if item.kind == "chunk" else None for item in pool]
    sentence_vectors = vectors.vectors(keys, groups)
    sentences: list[Sentence] = []
    rows: list[np.ndarray] = []
    for c, (group, matrix) in enumerate(zip(groups, sentence_vectors, strict=True)):
        for p, text in enumerate(group):
            sentences.append(Sentence(c, p, text))
            rows.append(matrix[p])
    if not sentences:
        return Compressed([], 0.0, len(pool))
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    cosine = np.vstack(rows) @ query
    wanted = terms(question)
    found = [terms(_CITES.sub(" ", s.text)) for s in sentences]  # "(Cohan et al., 2018)" matches no "2018"
    # The model reads every source with its paper's title: a question term of the title ("SPECTER") is held by
    # every sentence of that paper, so it never outweighs the terms that tell its sentences apart.
    titled = {c: terms(pool[c].paper_title or "") & wanted for c in range(len(pool)) if pool[c].kind == "chunk"}
    weight = _idf([found[i] | titled.get(x.candidate, set()) for i, x in enumerate(sentences)], wanted)
    whole = sum(weight.values())
    captions = _captions(pool, sentences, found, cosine)
    # Table candidates whose first sentence heads their rows: a header row, or the caption of a table read cell by
    # cell (whose first sentence, without a caption, is a row like the others).
    lifted = {c for c in range(len(pool)) if pool[c].section == "Table"
              and (not is_cell_table(pool[c].text or "") or TABLE_CAPTION.match(groups[c][0]))}
    # A candidate's terms: its sentences', and its paper's title and section, which the model reads with it.
    in_candidate = [set().union(terms(f"{pool[c].paper_title or ''} {pool[c].section or ''}"),
                                *(found[i] for i, x in enumerate(sentences) if x.candidate == c))
                    for c in range(len(pool))]
    context = [_share(weight, held, whole) for held in in_candidate]
    wants_number = bool(_ASKS_NUMBER.search(question))
    defined = _definition_pattern(question)
    for i, s in enumerate(sentences):
        held = found[i] | titled.get(s.candidate, set())
        similarity = float(cosine[i])
        caption = captions.get(s.candidate)
        share = _share(weight, held, whole)
        if s.candidate in lifted and s.position > 0:  # a row is read under its header and caption
            header = i - s.position  # the row's chunk's first sentence: its header row (or its caption)
            held = held | found[header]
            similarity = max(similarity, float(cosine[header]) - CAPTION_DISCOUNT)
            share = _share(weight, held, whole)
            if caption is not None:
                similarity = max(similarity, float(cosine[caption]) - CAPTION_DISCOUNT)
                # Half of it under the caption: the caption lifts every row of its table alike, and the row's own
                # words ("Neural") tell them apart.
                share = (share + _share(weight, held | found[caption], whole)) / 2
        short = len(s.text.split()) < MIN_SENTENCE_WORDS
        number = NUMBER_BONUS if wants_number and _STATES_NUMBER.search(_without_citations(s.text)) else 0.0
        section = pool[s.candidate].section or ""
        penalty = (REFERENCE_PENALTY if _REFERENCES.match(section) else 0.0) + (
            FRAGMENT_PENALTY if section != "Table" and len(_REAL_WORD.findall(_CITES.sub(" ", s.text))) < 3 else 0.0)
        definition = DEFINITION_BONUS if defined is not None and defined.search(s.text) else 0.0
        s.score = (similarity + lexical_weight * share + CONTEXT_WEIGHT * context[s.candidate]
                   + number
                   + definition - (0.5 if short else 0) - penalty)
    bearing = max(s.score for s in sentences)
    by_candidate: dict[int, list[Sentence]] = {}
    for s in sentences:
        by_candidate.setdefault(s.candidate, []).append(s)
    chosen: dict[int, set[int]] = {}
    seen_texts: set[str] = set()
    used = 0

    def take(group: list[Sentence]) -> bool:
        """Keep the sentences of ``group`` not kept yet, if they fit the budget (and the source cap)."""
        nonlocal used
        c = group[0].candidate
        if c not in chosen and len(chosen) >= max_sources:
            return False
        new = [x for x in group if x.position not in chosen.get(c, set()) and x.text.lower() not in seen_texts]
        cost = sum(x.tokens or _count(x, count_tokens) for x in new)
        if not new or used + cost > budget_tokens:
            return False
        chosen.setdefault(c, set()).update(x.position for x in new)
        seen_texts.update(x.text.lower() for x in new)
        used += cost
        return True

    ranked = sorted(sentences, key=lambda s: s.score, reverse=True)
    # First the best sentences themselves (a table row with its header row), as many as fit; then their
    # neighbours, best sentence first, while the budget lasts.
    for best in ranked:
        own = by_candidate[best.candidate]
        header = [own[0]] if best.candidate in lifted and best.position > 0 else []
        if take([*header, best]) and header and best.candidate in captions:
            take([sentences[captions[best.candidate]]])  # the row's caption too, when it fits
    for best in ranked:
        if best.position in chosen.get(best.candidate, set()):
            own = by_candidate[best.candidate]
            for near in range(1, NEIGHBOURS + 1):
                for p in (best.position - near, best.position + near):
                    if 0 <= p < len(own):
                        take([own[p]])
    # The sentences are chosen one by one; the sources they come from are sent in retrieval's order (the passage
    # ranked best as a whole first).
    order = sorted(chosen)
    items = []
    for c in order:
        kept = sorted(chosen[c])
        parts, last = [], None
        for p in kept:
            if last is not None and p != last + 1:
                parts.append(GAP.strip())
            parts.append(by_candidate[c][p].text)
            last = p
        text = " ".join(parts)
        if kept and kept[0] > 0:
            text = GAP.lstrip() + text
        if kept and kept[-1] < len(by_candidate[c]) - 1:
            text = text + GAP.rstrip()
        item = replace(pool[c], text=text)
        item.n_tokens = sum(by_candidate[c][p].tokens for p in kept)
        items.append(item)
    return Compressed(items, round(bearing, 4), len(pool), len(sentences), used, [pool[c].text for c in order])


def is_caption(sentence: str) -> bool:
    """Does ``sentence`` start "Table N" and say something beyond it ("Table 3." alone names no table)?"""
    return bool(TABLE_CAPTION.match(sentence)) and len(_REAL_WORD.findall(TABLE_CAPTION.sub("", sentence))) >= 2


def table_captions(items: list[RetrievedItem]) -> list[str]:
    """For each source, the caption of the table whose rows it sends ("" for any other source): a row says what it
    measures only under its caption ("Table 3: Results ... on SemEval-2017"), which the model reads with it."""
    out = []
    for item in items:
        sentences = split_sentences(item.text or "")[:2] if item.section == "Table" else []
        if sentences and TABLE_CAPTION.match(sentences[0]) and not is_caption(sentences[0]):
            sentences = [" ".join(sentences)]  # "Table 3." then its words: the splitter stopped at the number
        out.append(sentences[0] if sentences and is_caption(sentences[0]) else "")
    return out


def _captions(pool: Sequence[RetrievedItem], sentences: Sequence[Sentence], found: Sequence[set[str]],
              cosine: np.ndarray) -> dict[int, int]:
    """For each table candidate, the sentence (index) of the caption it is read under: among the candidates'
    sentences that start "Table N" and say something beyond it, one of the same paper on the rows' own pages, else on
    the page before or after (a float placed at a page's edge); the one that bears most on the question (by its
    cosine) among those nearest. A table's rows ("Neural 84.6 85.8") say which number is which only under their
    caption ("Table 4: The Bag of Concepts F1 score of the baseline and neural model")."""
    by_place: dict[tuple[str | None, int], list[int]] = {}
    for i, x in enumerate(sentences):
        item = pool[x.candidate]
        if item.kind == "chunk" and item.page_start is not None and is_caption(x.text):
            by_place.setdefault((item.paper_id, item.page_start), []).append(i)
    out = {}
    for c, item in enumerate(pool):
        if item.kind != "chunk" or item.section != "Table" or item.page_start is None:
            continue
        own = next((i for i, x in enumerate(sentences) if x.candidate == c and x.position == 0), None)
        if own is not None and TABLE_CAPTION.match(sentences[own].text) and "|" in (item.text or ""):
            out[c] = own  # a table read cell by cell: its own caption heads it
            continue
        first, last = item.page_start, item.page_end if item.page_end is not None else item.page_start
        for pages in (range(first, last + 1), (first - 1, last + 1)):
            found_at = [i for p in pages for i in by_place.get((item.paper_id, p), [])]
            if found_at:
                out[c] = max(found_at, key=lambda i: cosine[i])
                break
    return out


def _definition_pattern(question: str) -> re.Pattern | None:
    """For a question about what an acronym stands for, the pattern of a sentence that defines it ("(XAI)",
    "XAI stands for", "XAI, short for"); None for any other question."""
    if not _ASKS_EXPANSION.search(question):
        return None
    acronyms = [a for a in _ACRONYM.findall(question) if sum(ch.isupper() for ch in a) >= 2]
    if not acronyms:
        return None
    names = "|".join(re.escape(a) for a in acronyms)
    return re.compile(rf"\((?:{names})s?\)|\b(?:{names})\s*(?:\(|,? (?:stands|is short|is an acronym|abbreviates))")


def _without_citations(text: str) -> str:
    """``text`` without author-year citations ("(Devlin et al., 2019)") and bracketed reference numbers, whose
    numbers state nothing."""
    return re.sub(r"\([^()]*\b(19|20)\d\d[a-z]?\)|\[\d+(?:[,–-]\s*\d+)*\]|\b(19|20)\d\d\b", " ", text)


def _count(sentence: Sentence, count_tokens: Callable[[str], int]) -> int:
    sentence.tokens = count_tokens(sentence.text) + 1
    return sentence.tokens
