"""A table's cell as the answer, read without the model, when the question names its row and its column.

A small model misreads wide table rows: given "Dataset: BC5CDR; SOTA: 88.857; BERT-Base Frozen: 85.08; …; SCIBERT
Finetune: 90.01." it answers "5.59" or repeats the question. When the sources sent with a question hold a table read
cell by cell (:mod:`ingest.table_text`), each value cell is scored by the question's words that its row's labels
and its column's name hold ("What F1 does SciBERT reach on BC5CDR when fine-tuned?": BC5CDR, SciBERT, fine-tuned).
The cell is the answer only when it is plain:

- its row's labels hold a word of the question, and so does its column's name (an unnamed column only where it
  holds its row's one value);
- every name the question holds (SciBERT, BC5CDR) is in its row, its column, its table's caption or its paper's
  title, and so are at least :data:`MIN_COVERAGE` of the question's words;
- no other cell with another value scores as well: two cells a question names equally ("What did SciBERT get on
  ChemProt?", frozen or fine-tuned) leave it to the model;
- the cell states one value ("90.01", "52.2M (64.3%)", "90.41 ± 0.06"), not a label or three numbers at once.

The answer says which cell it read: "Table 1 gives 90.01 for SCIBERT Finetune in the row BC5CDR (Li et al., 2016)
[1]." The row is quoted under it as its evidence, and the check of every answer reads it as it reads the model's.

Words match as stems, a hyphenated word also as one ("fine-tuned" is "Finetune"), an abbreviation with its full
stop by a word whose letters it keeps ("Acc." is "accurate", "Avg." "average"), a capitalised acronym by the
initials of the question's words ("SOTA" is "state-of-the-art", "LM" "language model"), and a column's abbreviation
by what the caption says it stands for ("CITE: Citation prediction"). The caption and the paper's title count half
and tell tables apart; a word of a row's labels or a column's name that the question does not say counts against
it. The question must not compare two values or ask for a threshold, and the table's columns must have been told
apart (no two of one name, none that names two metrics).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from copilot.evidence import _ASKS_NUMBER, _CITES, row_sentence
from copilot.grounding import _stemmer, _stop_words, names_in
from copilot.types import RetrievedItem
from ingest.table_text import TABLE_CAPTION, cells, read_table

CAPTION_WEIGHT = 0.5
# A word of a row's labels or a column's name that the question does not hold costs this much: of "title" and
# "bibliography titles", "What F1 does ScienceParse reach on titles?" asks for the first.
EXTRA_WEIGHT = 0.5
MARGIN = 0.05  # a cell with another value scoring within this of the best makes the question ambiguous
# The share of the question's words (those below left out) that the cell's row, column and caption must hold: a
# question that names a row and a column but asks about something else ("What title-similarity score does a
# bibliography entry need to exceed …") is the model's.
MIN_COVERAGE = 0.6
# Words of a question that ask for a value without saying which: no table holds them.
_GENERIC = {"what", "which", "how", "mani", "much", "well", "doe", "get", "reach", "achiev", "obtain", "attain",
            "score", "result", "report", "list", "given", "shown", "valu", "number", "use"}
# A metric a question may name that a table need not (SciBERT's results table never says "F1").
_METRIC = re.compile(r"(?i:f1|f-?score|accuracy|acc|precision|recall|map|mrr|ndcg|auc|bleu(?:-\d)?|rouge(?:-\w+)?|"
                     r"[rp]@\d+|em|perplexity|ppl|las|uas)")
_ASKS = re.compile(r"\b(?:what|which|how)\b", re.IGNORECASE)
# "CITE: Citation prediction," in a caption: a column's abbreviation and what it stands for.
_LEGEND = re.compile(r"(?<![\w-])([A-Z][A-Za-z]{1,7}\.?):\s+([A-Za-z][A-Za-z -]{2,40}?)(?=\s*[,;.)]|$)")
# A question that compares two values ("By how many points does A beat B", "How much better …") asks for more than
# one cell; one about a threshold a method applies ("What score does an entry need before it is linked") asks for a
# setting the prose states, not a result.
_COMPARES = re.compile(r"\b(?:by\s+how\s+(?:much|many)|beats?|outperform\w*|differen\w*|improve\w*|gains?|"
                       r"better|worse|higher|lower|more\s+than|less\s+than|fewer|compared?|versus|vs\.?|"
                       r"thresholds?|cut-?offs?|needs?|exceeds?)\b", re.IGNORECASE)
_VALUE_WORD = re.compile(r"\b(?:results?|performance)\b", re.IGNORECASE)
_TOKEN = re.compile(r"[^\W_](?:[\w@]|[-'’./](?=[^\W_]))*")
_VALUE = re.compile(r"^[<>~≈]?\s*[-+−]?\d[\d,]*(?:\.\d+)?\s*(?:%|[kKMB]|x)?[*†‡§]*$")
_ASIDE = re.compile(r"\s*(?:\([^()]*\)|±\s*[\d.]+)\s*")  # "52.2M (64.3%)", "90.41 ± 0.06": one value still
_ABBREVIATION = re.compile(r"\b([A-Za-z]{2,})\.")  # "Acc.", "Avg.", "prec."
_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")  # "SOTA", "LM", "CS"


@dataclass
class Words:
    """A text's words as a table reader matches them."""

    stems: set[str]
    abbreviations: set[str]  # lower-cased, without their full stop
    acronyms: set[str]  # lower-cased


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def _token_stems(text: str) -> list[list[str]]:
    """Each word of ``text`` (stop words and single letters left out) as its stems: the whole word's first, then its
    hyphenated parts' ("fine-tuned": finetun, fine, tune)."""
    stop = _stop_words()
    out = []
    for token in _TOKEN.findall(text.lower()):
        token = token.removesuffix("'s").removesuffix("’s").rstrip(".")
        parts = [p for p in re.split(r"[-'’/.]", token) if p]
        whole = "".join(parts)
        if not (len(whole) > 1 or whole.isdigit()) or whole in stop:
            continue
        stems = [whole if whole[0].isdigit() else _stem(whole)]
        if len(parts) > 1:
            stems += [p if p[0].isdigit() else _stem(p) for p in parts if len(p) > 1 and p not in stop]
        out.append(stems)
    return out


def _held_share(token: list[str], matched: set[str]) -> float:
    """How much of one word of the question ``matched`` holds: all of it when its whole stem is held, else the share
    of its hyphenated parts ("title-similarity" by "Title": a half)."""
    whole, *parts = token
    if whole in matched:
        return 1.0
    return sum(p in matched for p in parts) / len(parts) if parts else 0.0


def words(text: str) -> Words:
    """``text``'s stems (see :func:`_token_stems`), abbreviations and acronyms."""
    return Words({s for token in _token_stems(text) for s in token}, {a.lower() for a in _ABBREVIATION.findall(text)},
                 {a.lower() for a in _ACRONYM.findall(text)})


def _abbreviates(abbreviation: str, word: str) -> bool:
    """Is ``abbreviation`` (without its full stop) the start of ``word`` and then some of its letters in order
    ("avg": average, "acc": accurate, "prec": precision)?"""
    if abbreviation[0] != word[0] or len(word) <= len(abbreviation):
        return False
    rest = iter(word[1:])
    return all(ch in rest for ch in abbreviation[1:])


def held(question: Words, spoken: Sequence[tuple[str, str]], text: Words) -> tuple[set[str], set[str]]:
    """The question's stems that ``text`` holds (by stem, by an abbreviation of a question's word, or by an acronym of
    the question's words' initials: the stems of the words it spells out), and the stems of ``text`` that matched
    so. ``spoken``: the question's words in order, hyphenated parts apart, each with its stem."""
    found = question.stems & text.stems
    used = set(found)
    for abbreviation in text.abbreviations:
        words_of = {s for w, s in spoken if len(abbreviation) >= 3 and _abbreviates(abbreviation, w)}
        if words_of:
            found |= words_of
            used.add(_stem(abbreviation))
    initials = "".join(w[0] for w, _ in spoken)
    for acronym in text.acronyms:
        at = initials.find(acronym) if acronym not in question.stems else -1
        if at >= 0:
            found.update(s for _, s in spoken[at:at + len(acronym)])
            used.add(_stem(acronym))
    return found, used


def legend(caption: str) -> dict[str, str]:
    """The abbreviations a caption spells out for its columns ("CITE: Citation prediction, USR: User activity"):
    abbreviation -> what it stands for."""
    return {m.group(1): m.group(2) for m in _LEGEND.finditer(caption)}


def asks_for_value(question: str) -> bool:
    """Does ``question`` ask for a value ("What F1 …", "How many …", "Which result is reported for …")?"""
    from copilot.answering import asks_for_quantity  # the check of answers asks the same of its questions
    return bool(_ASKS.search(question)) and (asks_for_quantity(question) or bool(_ASKS_NUMBER.search(question))
                                             or bool(_VALUE_WORD.search(question))
                                             or any(_METRIC.fullmatch(w) for w in re.findall(r"[\w@-]+", question)))


def one_value(cell: str) -> bool:
    """Does ``cell`` state one value (a number, with its unit, share or spread), not a label or several numbers?"""
    return bool(_VALUE.match(_ASIDE.sub(" ", cell).strip())) if any(ch.isdigit() for ch in cell) else False


@dataclass
class Cell:
    """A value cell of a table sent as source ``n``."""

    n: int  # the source's number, as the answer cites it
    table: str  # "Table 1", or "The table" when its caption gives no number
    column: str
    row: list[str]  # the row's label cells
    value: str
    quote: str  # the row as it was sent (:func:`copilot.evidence.row_sentence`)
    title: set[str] = field(default_factory=set)  # the stems of its paper's title, which the model reads with it
    metrics: bool = False  # its table names a metric (in its caption or a column)
    score: float = 0.0
    coverage: float = 0.0  # the share of the question's words its row, column, caption and paper's title hold


def merged(column: str) -> bool:
    """Is ``column`` the names of several columns run together ("RoBERTa P R F1", "… nDCG MAP MAP"): two metrics,
    or one word twice?"""
    said = [w.casefold() for w in re.findall(r"[\w@-]+", column)]
    metrics = {w for w in said if _METRIC.fullmatch(w) or w in ("p", "r", "f")}
    return len(metrics) > 1 or len(set(said)) < len(said)


def _cells(n: int, item: RetrievedItem, original: str) -> list[tuple[Cell, Words, Words, Words]]:
    """The value cells of the rows of the table ``original`` that were sent (their row sentence is in ``item``'s
    text), each with the words of its row labels, its column's name and its caption."""
    table = read_table(original)
    if table is None:
        return []
    caption = " ".join(line.strip() for line in table.above if line.strip())
    numbered = TABLE_CAPTION.match(caption)
    name = f"Table {numbered.group('number')}" if numbered else "The table"
    caption_words = words(caption)
    title = words(item.paper_title or "").stems
    names = cells(table.header)
    if len({x.casefold() for x in names if x}) < len([x for x in names if x]):
        return []  # two columns of one name: its header rows were not told apart, so no column can be trusted
    spelled = legend(caption)
    metrics = any(_METRIC.fullmatch(w) for w in re.findall(r"[\w@-]+", " ".join([caption, *names])))
    sent = " ".join((item.text or "").split())
    out = []
    for line in table.rows:
        row = cells(line)
        quote = row_sentence(names, row)
        if not quote or quote not in sent:
            continue
        values = [j for j, c in enumerate(row) if one_value(c)]
        if not values:
            continue
        # The row's labels: its cells before its first value ("Task: NER; Dataset: BC5CDR"), not the text other
        # columns hold beside its values ("Citation contexts: full text").
        labels = [c for c in row[:values[0]] if c] or [c for c in row if c and not one_value(c)]
        row_words = words(_CITES.sub(" ", " ".join(labels)))  # "BC5CDR (Li et al., 2016)" is BC5CDR
        for j in values:
            column = names[j] if j < len(names) else ""
            if column and merged(column):
                continue
            if column or len(values) == 1:  # an unnamed column only where it is the row's one value
                meant = " ".join(v for k, v in spelled.items() if re.search(rf"(?<!\w){re.escape(k)}(?!\w)", column))
                out.append((Cell(n, name, column, labels, row[j], quote, title, metrics), row_words,
                            words(f"{column} {meant}"), caption_words))
    return out


def read_cell(question: str, items: Sequence[RetrievedItem], originals: Sequence[str]) -> Cell | None:
    """The one cell of the tables sent (``items``, with each item's whole text in ``originals``) that answers
    ``question``, or None when no cell plainly does (see the module's docstring)."""
    if len(originals) != len(items):  # sources not cut by copilot.evidence.compress are whole already
        originals = [item.text for item in items]
    found = [c for n, (item, original) in enumerate(zip(items, originals, strict=True), start=1)
             if item.kind == "chunk" for c in _cells(n, item, original)]
    if not found or not asks_for_value(question) or _COMPARES.search(question):
        return None
    asked = words(question)
    asked.stems -= _GENERIC
    tokens = [t for t in _token_stems(question) if not set(t) & _GENERIC]  # the words that say which value
    if not tokens:
        return None
    spoken = [(w, _stem(w)) for w in re.findall(r"[^\W\d_]+", question.lower())]
    names = [(name, words(name).stems) for name in names_in(question)]
    scored: list[Cell] = []
    for cell, row_words, column_words, caption_words in found:
        by_row, row_used = held(asked, spoken, row_words)
        by_column, column_used = held(asked, spoken, column_words)
        if not by_row or not (by_column or cell.column == ""):
            continue
        by_caption = held(asked, spoken, caption_words)[0] - by_row - by_column
        by_title = (cell.title & asked.stems) - by_row - by_column - by_caption
        everything = row_words.stems | column_words.stems | caption_words.stems | cell.title
        if any(stems and not (stems & everything) and not (_METRIC.fullmatch(name) and not cell.metrics)
               for name, stems in names):
            continue  # a name the question holds that neither this cell's table nor its paper's title does (a metric
            # the table never names aside)
        matched = by_row | by_column | by_caption | by_title
        # A metric that the table never names is not held against it (its words are the cell's own, unsaid).
        wanted = [t for t in tokens if cell.metrics or not any(_METRIC.fullmatch(w) for w in t)]
        if not wanted or sum(_held_share(t, matched) for t in wanted) < MIN_COVERAGE * len(wanted):
            continue  # the question asks about more than this cell's row and column
        extra = (row_words.stems - row_used) | (column_words.stems - column_used)
        cell.coverage = sum(_held_share(t, matched) for t in wanted) / len(wanted)
        cell.score = (len(by_row | by_column) + CAPTION_WEIGHT * len(by_caption | by_title)
                      - EXTRA_WEIGHT * len(extra))
        scored.append(cell)
    if not scored:
        return None
    scored.sort(key=lambda c: c.score, reverse=True)
    best = scored[0]
    value = _ASIDE.sub(" ", best.value).strip()
    if any(c.score > best.score - MARGIN and _ASIDE.sub(" ", c.value).strip() != value for c in scored[1:]):
        return None  # another cell, with another value, answers it as well
    return best


def answer(cell: Cell) -> str:
    """The cell as an answer sentence that says where it was read, citing its source."""
    row = ", ".join(cell.row)
    where = f" in the row {row}" if row else ""
    column = f" for {cell.column}" if cell.column else ""
    return f"{cell.table} gives {cell.value}{column}{where} [{cell.n}]."
