"""Tables read cell by cell: PyMuPDF's ``page.find_tables()`` on the pages that hold a table caption.

``find_tables`` runs PyMuPDF's learned layout analysis, which finds the table's region and its grid of rows and
columns even when the table has no rules (about half a second a page on a CPU, so only pages with a "Table N"
caption are read this way). Each table becomes Markdown sources of at most :data:`ROWS_PER_SOURCE` rows, every one
under the table's caption and its header, so that a row says which number is which wherever it is retrieved:

    Table 1: Test performances of all BERT variants on all tasks and datasets.
    | Field | Task | Dataset | SOTA | BERT-Base Frozen | BERT-Base Finetune | SciBERT Frozen | SciBERT Finetune |
    |---|---|---|---|---|---|---|---|
    | Bio | NER | BC5CDR (Li et al., 2016) | 88.857 | 85.08 | 86.72 | 88.73 | 90.01 |

A label over several columns ("BERT-Base" over "Frozen" and "Finetune") is joined to each column's name. A label
spanning several rows ("Bio") stays on the row it stands by: whether it is centred on its group or set at its top,
the PDF does not say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pymupdf

from ingest.table_text import TABLE_CAPTION, row_line, rule_line

ROWS_PER_SOURCE = 5  # a long table becomes sources of this many rows, each under the table's caption and header
MAX_CAPTION_CHARS = 240  # a caption's first sentence, at most this long, heads each of its table's sources
_HEADER_ROWS = 3  # at most this many leading rows without a number make the header
_WORD_FLAGS = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP  # ligatures expanded ("ﬁ": "fi")
# A cell that states a value: "90.01", "20k", "0.3M", "<100", "±0.3" (not "(2-way)" or "1BW", which name things).
_DATA = re.compile(r"^[(\[]?[-+\u2212\u00b1~<>≈]?\.?\d[\d.,]*(?!-?[A-Za-z]{2})")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]][.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class FoundTable:
    """A table of a page: its region (PDF points, top-left origin), caption and Markdown sources."""

    bbox: tuple[float, float, float, float]
    caption: str
    sources: list[str]


def has_table_caption(texts: list[str]) -> bool:
    """Does one of these lines open a table's caption ("Table 3: ...")?"""
    return any(TABLE_CAPTION.match(t) for t in texts)


def read_tables(page: pymupdf.Page, captions: list[tuple[str, pymupdf.Rect]]) -> list[FoundTable]:
    """The tables PyMuPDF finds on ``page``, each with the nearest table caption of ``captions`` (text and region of
    each caption block of the page): the one just above or below the table that overlaps it across."""
    try:
        found = _layout_tables(page)
    except (RuntimeError, ValueError, IndexError, AttributeError, ImportError):  # odd drawings, no layout model
        return []
    out = []
    for table in found:
        if table.col_count < 2:
            continue
        box = pymupdf.Rect(table.bbox)
        sources = table_sources(_cells(page, table), _caption_of(box, captions))
        if sources:
            out.append(FoundTable((round(box.x0, 1), round(box.y0, 1), round(box.x1, 1), round(box.y1, 1)),
                                  _caption_of(box, captions), sources))
    return out


def _layout_tables(page: pymupdf.Page) -> list[Any]:
    """The tables of ``page`` as PyMuPDF's layout analysis finds them: its table regions, each cut into rows and
    columns by MuPDF's grid finder. This is what ``page.find_tables()`` returns for them, without its line-based
    finder over the whole page, whose candidates the layout's regions replace on the papers measured (about a
    third of the time of a page)."""
    from pymupdf.table import TABLE_DETECTOR_FLAGS, Table, make_table_from_bbox

    page.get_layout()
    boxes = [pymupdf.Rect(b[:4]) for b in page.layout_information or [] if b[-1] == "table"]
    if not boxes:
        return []
    textpage = page.get_textpage(flags=TABLE_DETECTOR_FLAGS)
    words = [pymupdf.Rect(w[:4]) for w in textpage.extractWORDS()]
    return [Table(page, cells) for box in boxes if (cells := make_table_from_bbox(textpage, words, box))]


def _caption_of(box: pymupdf.Rect, captions: list[tuple[str, pymupdf.Rect]]) -> str:
    """The first sentence of the table caption nearest ``box`` (above or below it, within 80 points, overlapping it
    across), or ""."""
    near = [(min(abs(r.y0 - box.y1), abs(box.y0 - r.y1)), text) for text, r in captions
            if TABLE_CAPTION.match(text) and r.x0 < box.x1 and r.x1 > box.x0
            and (0 <= r.y0 - box.y1 <= 80 or 0 <= box.y0 - r.y1 <= 80)]
    if not near:
        return ""
    text = " ".join(min(near)[1].split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    return first if len(first) <= MAX_CAPTION_CHARS else first[:MAX_CAPTION_CHARS].rsplit(" ", 1)[0] + " …"


def _cells(page: pymupdf.Page, table: Any) -> list[list[str | None]]:  # noqa: ANN401 - a PyMuPDF table
    """A table's cell texts (None: merged into a neighbour): the page's words whose centre the cell holds, a line of
    the PDF a line of the cell. (``Table.extract`` reads character by character and cuts "0.3M" at a decimal point
    set lower than its digits; MuPDF's words keep it whole.) A row the grid did not cut into the table's rows (each
    cell a column of values) is cut at its lines (:func:`_split_tall_row`)."""
    words = page.get_text("words", clip=pymupdf.Rect(table.bbox) + (-1, -1, 1, 1), flags=_WORD_FLAGS)
    out: list[list[str | None]] = []
    for row in table.rows:
        cells: list[list[tuple[float, float, float, str]] | None] = []
        for box in row.cells:
            if box is None:
                cells.append(None)
                continue
            x0, y0, x1, y1 = box
            inside = [w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1]
            lines: dict[tuple[int, int], list[tuple]] = {}
            for w in sorted(inside, key=lambda w: (w[5], w[6], w[7])):
                lines.setdefault((w[5], w[6]), []).append(w)
            cells.append(sorted(((min(w[1] for w in ws) + max(w[3] for w in ws)) / 2, max(w[3] - w[1] for w in ws),
                                 min(w[0] for w in ws), " ".join(w[4] for w in ws)) for ws in lines.values()))
        out += _split_tall_row(cells)
    return out


def _split_tall_row(cells: list[list[tuple[float, float, float, str]] | None]) -> list[list[str | None]]:
    """A row's cells (each its lines: centre, height, left edge, text) as rows. When a cell holds a column of values
    ("84.2", "84.6" on two lines), the grid missed the rows between them: the row is cut where its lines' centres
    part, so "Baseline" stays beside "84.2" and "Neural" beside "84.6", and a header line above them gets a row of
    its own.
    Otherwise each cell's lines are kept, one after the other."""
    tall = any(c is not None and sum(1 for *_, text in c if _DATA.match(text)) >= 2 for c in cells)
    if not tall:
        return [[None if c is None else "\n".join(text for *_, text in c) for c in cells]]
    lines = sorted((y, h) for c in cells if c is not None for y, h, _, _ in c)
    bands: list[list[float]] = []
    for y, h in lines:
        if bands and y - bands[-1][-1] <= 0.5 * h:
            bands[-1].append(y)
        else:
            bands.append([y])
    centres = [sum(b) / len(b) for b in bands]

    def band(y: float) -> int:
        return min(range(len(centres)), key=lambda k: abs(centres[k] - y))

    texts: list[list[list[str] | None]] = [[None if c is None else [] for c in cells] for _ in bands]
    for j, c in enumerate(cells):
        for y, _, _, text in sorted(c or [], key=lambda line: line[2]):  # left to right within a band
            texts[band(y)][j].append(text)  # type: ignore[union-attr]
    # A cell whose every row of values holds the same number (2 or more) of separate runs ("41.4", "115.6") is that
    # many columns the grid joined: it is cut, and a header run above them that is alone spans them.
    values = [k for k, row in enumerate(texts) if any(t and any(_DATA.match(x) for x in t) for t in row)]
    rows: list[list[str | None]] = [[] for _ in bands]
    for j in range(len(cells)):
        counts = {len(texts[k][j] or []) for k in values}
        split = len(counts) == 1 and min(counts) > 1
        for k, row in enumerate(texts):
            cell = row[j]
            if cell is None:
                rows[k].append(None)
            elif not split:
                rows[k].append(" ".join(cell))
            elif len(cell) == min(counts):
                rows[k] += cell
            else:  # a header over the cut columns names them all
                rows[k] += [" ".join(cell)] + [None] * (min(counts) - 1)
    return rows


def _clean(text: str | None) -> str:
    """A cell's text on one line, as the page's text is cleaned (ligatures, TeX's separate accents) and its lines
    joined (a word hyphenated at a line end made whole); a "|" would end the Markdown cell, so it reads "/"."""
    from ingest.pdf.page import _clean as clean_line
    from ingest.pdf.text import join_lines

    lines = [clean_line(line) for line in (text or "").split("\n")]
    return join_lines([line for line in lines if line]).replace("|", "/")


def table_sources(rows: list[list[str | None]], caption: str = "") -> list[str]:
    """A table's cells (``None``: a cell merged into its neighbour) as Markdown sources of at most
    :data:`ROWS_PER_SOURCE` rows, each under ``caption`` and the header: the leading rows without a value, a
    spanning cell's name carried over the columns it spans and the header rows joined ("BERT-Base" over "Frozen":
    "BERT-Base Frozen")."""
    if len(rows) < 2 or max(len(r) for r in rows) < 2:
        return []
    width = max(len(r) for r in rows)
    header: list[list[str | None]] = []
    for row in rows[:_HEADER_ROWS]:
        if any(c and _DATA.match(_clean(c)) for c in row):
            break
        header.append(row)
    header = header[:len(rows) - 1]  # a table whose first row states values has no header: its columns go unnamed
    names = [""] * width
    for row in header:
        last = ""
        for j in range(width):
            cell = row[j] if j < len(row) else ""
            text = last if cell is None else _clean(cell)  # a spanning cell names every column it spans
            last = text
            if text and not names[j].endswith(text):
                names[j] = f"{names[j]} {text}".strip()
    data = [[_clean(row[j]) if j < len(row) else "" for j in range(width)] for row in rows[len(header):]]
    data = _spread_labels([row for row in data if any(row)])
    if not data:
        return []
    head = (caption + "\n" if caption else "") + row_line(names) + "\n" + rule_line(width)
    return [head + "\n" + "\n".join(row_line(row) for row in data[i:i + ROWS_PER_SOURCE])
            for i in range(0, len(data), ROWS_PER_SOURCE)]


def _spread_labels(data: list[list[str]]) -> list[list[str]]:
    """A row holding only a label ("DEP" set between the two GENIA rows it names, no value beside it) is a label
    centred on the rows around it: it goes into both, where they have nothing in its column, and its row goes."""
    out = [list(row) for row in data]
    k = 1
    while k < len(out) - 1:
        row = out[k]
        filled = [j for j, cell in enumerate(row) if cell]
        if filled and not any(_DATA.match(row[j]) for j in filled) and all(
                not out[k - 1][j] and not out[k + 1][j] for j in filled) and any(
                _DATA.match(c) for c in out[k - 1] + out[k + 1] if c):
            for j in filled:
                out[k - 1][j] = out[k + 1][j] = row[j]
            del out[k]
        else:
            k += 1
    return out
