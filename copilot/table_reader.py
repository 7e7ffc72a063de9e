"""A table's cell as the answer, read without the model, when the question names its row and its column.

A small model misreads wide table rows: given "Dataset: BC5CDR; SOTA: 88.857; BERT-Base Frozen: 85.08; …; SCIBERT
Finetune: 90.01." it answers "5.59" or repeats the question. When the sources sent with a question hold a table read
cell by cell (:mod:`ingest.table_text`), each value cell is scored by the question's words that its row's labels
and its column's name hold ("What F1 does SciBERT reach on BC5CDR when fine-tuned?": BC5CDR, SciBERT, fine-tuned).
The cell is the answer only when it is plain:

- its row's labels hold a word of the question, and so does its column's name (an unnamed column only where it
  holds its row's one value);
- every name the question holds (SciBERT, BC5CDR) is in its row, its column, its table's caption or its paper's
  title (a metric that a table of results never names aside), and so are at least :data:`MIN_COVERAGE` of the
  question's words, every number it states, and what it asks for ("How many epochs …", "What accuracy …": where
  the table has a column of it, the cell is in that column);
- the question and the cell's row and column are both negated ("without the abstract": "−abstract") or neither;
- no other cell with another value scores as well: two cells a question names equally ("What did SciBERT get on
  ChemProt?", frozen or fine-tuned) leave it to the model;
- the cell states one value ("90.01", "52.2M (64.3%)", "90.41 ± 0.06"), not a label or three numbers at once.

The answer says which cell it read: "Table 1 gives 90.01 for SCIBERT Finetune in the row BC5CDR (Li et al., 2016)
[1]." The row is quoted under it as its evidence; the answer must pass the support check every answer passes, else
the model answers (:meth:`copilot.answering.Answerer._table_cell`).

Words match as stems, a hyphenated word also as one ("fine-tuned" is "Finetune"), an abbreviation with its full
stop by a word whose letters it keeps ("Acc." is "accurate", "Avg." "average"), a capitalised acronym by the
initials of the question's words ("SOTA" is "state-of-the-art", "LM" "language model"), and a column's abbreviation
by what the caption says it stands for ("CITE: Citation prediction"). The caption and the paper's title count half
and tell tables apart; a word of a row's labels or a column's name that the question does not say counts against
it. The question must not compare two values or ask for a threshold, and the table's columns must have been told
apart (no two of one name, none that names two metrics). An abbreviation can mislead it: "Rec." is read as
"recall" and as "recommendation" alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from copilot import prompts
from copilot.evidence import _ASKS_NUMBER, _CITES, row_sentence
from copilot.grounding import names_in, stemmer, stop_words
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
_GENERIC = {"what", "which", "how", "mani", "much", "well", "do", "doe", "did", "get", "got", "reach", "achiev",
            "obtain", "attain", "score", "result", "report", "list", "given", "shown", "valu", "number", "use"}
# A metric a question may name that a table need not (SciBERT's results table never says "F1").
_METRIC = re.compile(r"(?i:f1|f-?score|accura(?:cy|ci)|acc|precis(?:ion)?|recal{1,2}|map|mrr|ndcg|auc|bleu(?:-?\d)?|"
                     r"rouge(?:-?\w+)?|[rp]@\d+|em|perplex(?:ity)?|ppl|las|uas)")
_ASKS = re.compile(r"\b(?:what|which|how)\b", re.IGNORECASE)
# "CITE: Citation prediction," in a caption: a column's abbreviation and what it stands for.
_LEGEND = re.compile(r"(?<![\w-])([A-Z][A-Za-z]{1,7}\.?):\s+([A-Za-z][A-Za-z -]{2,40}?)(?=\s*[,;.)]|$)")
# A question that compares two values ("By how many points does A beat B", "How much better …") asks for more than
# one cell; one about a threshold a method applies ("What score does an entry need before it is linked") asks for a
# setting the prose states, not a result.
_COMPARES = re.compile(r"\b(?:by\s+how\s+(?:much|many)|beats?|outperform\w*|differen\w*|improve\w*|gains?|"
                       r"better|worse|higher|lower|more\s+than|less\s+than|fewer|compared?|versus|vs\.?|"
                       r"thresholds?|cut-?offs?|needs?|exceeds?|drops?|decreas\w*|reduc\w*|increas\w*|delta|"
                       r"relative|changes?)\b", re.IGNORECASE)
# A caption of a table of results, whose metric a question may name though the table does not.
_RESULTS = re.compile(r"\b(?:results?|performances?|scores?|evaluation|evaluated|comparison|comparing|compared)\b",
                      re.IGNORECASE)
# Negation, in a question ("without", "not", "w/o") or in a row's or column's label ("−abstract", "No hard
# negatives", "w/o pretraining"): a cell is read only when both or neither say it.
_NEGATION = re.compile(r"(?:^|(?<=[\s(]))(?:without|not|non|w/o|excluding|except|minus|no(?!\.))\b|n't\b"
                       r"|(?:^|(?<=[\s(]))[−–-](?=\w)", re.IGNORECASE)
# A number a question states ("12 layers", "Table 3", "in 2019"; not R@10 or SemEval-2017): the cell's row, column,
# caption or paper title must state it too.
_NUMBER = re.compile(r"(?<![\w@.\-/])\d+(?:\.\d+)?(?![\w@])")
# What a question asks for, named after its question word: "What F1 …", "How many epochs …", "What is ScienceParse's
# recall on …", "What's the fine-tuned SciBERT result on …". Its words (those that ask for no value aside) must be
# the cell's.
_STOPS = r"(?:is|was|are|were|does|did|do|has|have|had|can|could|would|will|on|for|of|in|at|with|by|from|when|to)"
_ASKED = re.compile(r"\b(?:how\s+(?:many|much)|what(?:'s|’s)?|which)\s+(?:(?:is|was|are|were)\s+)?(?:the\s+)?"
                    rf"((?:(?!{_STOPS}\b)[\w@'’-]+\s+){{1,4}}?)(?={_STOPS}\b)", re.IGNORECASE)
_VALUE_WORD = re.compile(r"\b(?:results?|performance)\b", re.IGNORECASE)
_TOKEN = re.compile(r"[^\W_](?:[\w@]|[-'’./](?=[^\W_]))*")
_VALUE = re.compile(r"^[<>~≈]?\s*[-+−]?\d[\d,]*(?:\.\d+)?\s*(?:%|[kKMB]|x)?[*†‡§]*$")
_ASIDE = re.compile(r"\s*(?:\([^()]*\)|±\s*[\d.]+)\s*")  # "52.2M (64.3%)", "90.41 ± 0.06": one value still
_ABBREVIATION = re.compile(r"\b([A-Za-z]{2,})\.")  # "Acc.", "Avg.", "prec."
_UNIT = re.compile(r"\(([A-Za-z]{2,5})\)")  # a unit in a column's name: "Time (secs)"
_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")  # "SOTA", "LM", "CS"


@dataclass
class Words:
    """A text's words as a table reader matches them."""

    stems: set[str]
    abbreviations: set[str]  # lower-cased, without their full stop
    acronyms: set[str]  # lower-cased


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return stemmer().stem(word)


def _token_stems(text: str) -> list[list[str]]:
    """Each word of ``text`` (stop words and single letters left out) as its stems: the whole word's first, then its
    hyphenated parts' ("fine-tuned": finetun, fine, tune)."""
    stop = stop_words()
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


def is_metric(word: str) -> bool:
    """Is ``word`` a metric's name (F1, MAP, R@10, BLEU-4), which a table of results need not say?"""
    return _METRIC.fullmatch(word) is not None


def _metric_word(token: list[str]) -> bool:
    """Is this word of a question (its stems) a metric's name (F1, accuracy, R@10, BLEU-4)?"""
    return any(_METRIC.fullmatch(w) for w in token)


def _held_share(token: list[str], matched: set[str]) -> float:
    """How much of one word of the question ``matched`` holds: all of it when its whole stem is held, else the share
    of its hyphenated parts ("title-similarity" by "Title": a half)."""
    whole, *parts = token
    if whole in matched:
        return 1.0
    return sum(p in matched for p in parts) / len(parts) if parts else 0.0


def words(text: str) -> Words:
    """``text``'s stems (see :func:`_token_stems`), abbreviations and acronyms."""
    shortened = _ABBREVIATION.findall(text) + _UNIT.findall(text)
    return Words({s for token in _token_stems(text) for s in token}, {a.lower() for a in shortened},
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
        words_of = {s for w, s in spoken if len(abbreviation) >= 3 and s not in _GENERIC
                    and w not in stop_words() and _abbreviates(abbreviation, w)}
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
    # Its table reports results ("Test performances of …") and names no metric in its caption or columns: a metric
    # the question names (SciBERT's F1) is the cell's, unsaid.
    unsaid_metric: bool = False
    caption: str = ""
    paper_title: str = ""
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
    table = read_table(original or "")
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
    unsaid_metric = (bool(_RESULTS.search(caption))
                     and not any(_METRIC.fullmatch(w) for w in re.findall(r"[\w@-]+", " ".join([caption, *names]))))
    sent = " ".join((item.text or "").split())
    out = []
    for line in table.rows:
        row = cells(line)
        quote = row_sentence(names, row)
        if not quote or not re.search(rf"(?:^|[.…]\s){re.escape(quote)}(?=\s|$)", sent):
            continue  # a row not sent ("BERT; 8." is not sent with "SciBERT; 8.5.")
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
                cell = Cell(n, name, column, labels, row[j], quote, title, unsaid_metric, caption,
                            item.paper_title or "")
                out.append((cell, row_words, words(f"{column} {meant}"), caption_words))
    return out


def read_cell(question: str, items: Sequence[RetrievedItem], originals: Sequence[str]) -> Cell | None:
    """The one cell of the tables sent (``items``, with each item's whole text in ``originals``) that answers
    ``question``, or None when no cell plainly does (see the module's docstring)."""
    if not asks_for_value(question) or _COMPARES.search(question):
        return None
    if len(originals) != len(items):  # sources not cut by copilot.evidence.compress are whole already
        originals = [item.text for item in items]
    found = [c for n, (item, original) in enumerate(zip(items, originals, strict=True), start=1)
             if item.kind == "chunk" for c in _cells(n, item, original)]
    if not found:
        return None
    asked = words(question)
    asked.stems -= _GENERIC
    tokens = [t for t in _token_stems(question) if not set(t) & _GENERIC]  # the words that say which value
    if not tokens:
        return None
    spoken = [(w, _stem(w)) for w in re.findall(r"[^\W\d_]+", question.lower())]
    names = [(name, words(name).stems) for name in names_in(question)]
    measure = _ASKED.search(question)
    measured = [t for t in _token_stems(measure.group(1)) if not set(t) & _GENERIC] if measure else []
    numbers = set(_NUMBER.findall(question))
    negated = bool(_NEGATION.search(question))
    columns_held: dict[int, set[str]] = {}  # per source: the question's stems its tables' columns hold
    readings = []
    for cell, row_words, column_words, caption_words in found:
        by_column, column_used = held(asked, spoken, column_words)
        columns_held.setdefault(cell.n, set()).update(by_column)
        readings.append((cell, row_words, column_words, caption_words, by_column, column_used))
    scored: list[Cell] = []
    for cell, row_words, column_words, caption_words, by_column, column_used in readings:
        by_row, row_used = held(asked, spoken, row_words)
        if not by_row or not (by_column or cell.column == ""):
            continue
        said = " ".join([*cell.row, cell.column])
        if bool(_NEGATION.search(said)) != negated:
            continue  # "without the abstract" is the row "−abstract"; "with hard negatives" is not "No hard …"
        if numbers - set(_NUMBER.findall(" ".join([said, cell.caption, cell.paper_title]))):
            continue  # "with 12 layers", "in Table 3": a number of the question this cell's table does not state
        by_caption = held(asked, spoken, caption_words)[0] - by_row - by_column
        by_title = (cell.title & asked.stems) - by_row - by_column - by_caption
        everything = row_words.stems | column_words.stems | caption_words.stems | cell.title
        # A metric a table of results never names (SciBERT's results never say "F1") is not held against it.
        unsaid = cell.unsaid_metric
        if any(stems and not (stems & everything) and not (unsaid and _METRIC.fullmatch(name))
               for name, stems in names):
            continue  # a name the question holds that neither this cell's table nor its paper's title does
        matched = by_row | by_column | by_caption | by_title
        own = by_row | by_column
        if any(_held_share(t, matched) < 0.5 and not (unsaid and _metric_word(t)) for t in measured):
            continue  # "How many epochs …" of a table of scores: what is asked for is not what the table gives
        if any(_held_share(t, columns_held[cell.n]) > 0 and _held_share(t, by_column) == 0 for t in measured):
            continue  # "What accuracy …": the table has a column of accuracies, and this cell is not in it
        wanted = [t for t in tokens if not (unsaid and _metric_word(t))]
        if not wanted or sum(_held_share(t, matched) for t in wanted) < MIN_COVERAGE * len(wanted):
            continue  # the question asks about more than this cell's row and column
        extra = (row_words.stems - row_used) | (column_words.stems - column_used)
        cell.coverage = sum(_held_share(t, matched) for t in wanted) / len(wanted)
        cell.score = (sum(_held_share(t, own) for t in wanted)
                      + CAPTION_WEIGHT * sum(_held_share(t, matched) - _held_share(t, own) for t in wanted)
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
    return prompts.table_cell(cell.table, cell.value, cell.column, ", ".join(cell.row), cell.n)
