"""Numbered display equations kept in the body where they stand.

PyMuPDF gives a typeset equation as scattered short pieces (``L = max``, ``d``, ``PQ, P+``, ``+ m``, ``(2)``): too
short and too wordless to pass for prose, so the page's text would drop them as figure debris. A piece of text
that is only an equation number, ``(2)``, at the right of its column marks a display equation: the pieces level
with it in that column are joined into one line, row by row (a fraction's denominator, a wrapped equation's second
row after the first), each row left to right, its number written ``(Equation 2)``, so that retrieval reads the word
and the number a question about "equation 2" uses. A number set below its equation (a long one) is brought back to
it. An equation typeset as a line of text ("v = Transformer(input)[CLS], (1)") keeps its line, its number written
the same way; one without a number ("d(PA, PB) = ∥vA −vB∥2,") is kept where it stands between two paragraphs.
Symbols a math font draws without a Unicode mapping are lost; the letters, digits and operators stay.
"""

from __future__ import annotations

import re
import unicodedata

from ingest.pdf.page import _Block, _Line

_NUMBER = re.compile(r"^\((\d{1,3}[a-z]?)\)$")
_TRAILING_NUMBER = re.compile(r"\s*\((\d{1,3}[a-z]?)\)$")
_PROSE = re.compile(r"[^\W\d_]{2,}[,;]?\s+[^\W\d_]{2,}[,;]?\s+[^\W\d_]{2,}[,;]?\s+[^\W\d_]{2,}")  # four words in a row
_MATH = re.compile(r"[=<>≤≥≈∝∑∏∫√±×·∈∀∃→←⇒]")
_RELATION = re.compile(r"[A-Za-z)\]|∥]\s*(?:=|≤|≥|≈|∝|:=)\s*\S")
GAP_LINES = 2.0  # font sizes: an unnumbered equation stands at most this far from the paragraphs above and below
RIGHT_REACH = 20.0  # points: an equation number stands this close to its column's right edge (or closer)
INDENT = 10.0  # points: a line of a paragraph's block set this far right of the block's left edge is set apart
MAX_PIECE_CHARS = 120  # a block longer than this is prose, not a piece of an equation
MAX_NUMBERS = 50  # equation numbers read on one page: a page of thousands of "(n)" costs no more than this


def _is_piece(block: _Block) -> bool:
    """Could ``block`` be (part of) a typeset equation: a few short lines, none of them a run of words?"""
    return (len(block.lines) <= 3 and block.n_chars <= MAX_PIECE_CHARS
            and not any(_PROSE.search(line.text) for line in block.lines))


def _visible(text: str) -> str:
    """``text`` without the control characters a math font's unmapped glyphs become."""
    return " ".join("".join(ch for ch in text if unicodedata.category(ch) != "Cc").split())


def _numbered(text: str, number: str) -> str:
    return f"{text} (Equation {number})".strip()


def _overlaps(block: _Block, y0: float, y1: float) -> bool:
    return min(block.y1, y1) - max(block.y0, y0) > 0.5


def _same_row(block: _Block, first: _Block) -> bool:
    """Does ``block`` stand on the row that ``first`` (its highest piece) opened: level with it for at least half
    the smaller height (a tall bracket spans the row; a wrapped equation's second row does not)?"""
    shared = min(block.y1, first.y1) - max(block.y0, first.y0)
    return shared >= 0.5 * min(block.y1 - block.y0, first.y1 - first.y0)


def _equation_line(pieces: list[_Block], number: _Line) -> _Line:
    """The pieces' lines (the number's own left out) as one line: row by row, each row left to right."""
    rows: list[list[_Block]] = []
    for block in sorted((b for b in pieces if b.lines != [number]), key=lambda b: b.y0):
        row = next((r for r in rows if _same_row(block, r[0])), None)
        if row is None:
            rows.append([block])
        else:
            row.append(block)
    parts = [_visible(line.text) for row in rows for block in sorted(row, key=lambda b: b.x0)
             for line in block.lines if line is not number]
    size = max(pieces, key=lambda b: b.n_chars).size
    return _Line(_numbered(" ".join(p for p in parts if p), number.text.strip("()")), min(b.x0 for b in pieces),
                 min(b.y0 for b in pieces), max(b.x1 for b in pieces), max(b.y1 for b in pieces), size, size, False,
                 number.page)


def join_equations(blocks: list[_Block], width: float) -> list[_Block]:
    """``blocks`` (one page's, in any order) with each numbered display equation's pieces joined into one block
    marked ``equation``, and each unnumbered one marked; the other blocks as they were. A number that wrapped onto
    the first line of the next paragraph's block (a long equation) leaves it for the equation right above it."""
    middle = width / 2
    piece = {id(b): _is_piece(b) for b in blocks}
    prose = [b for b in blocks if not piece[id(b)]]
    two_columns = any(b.x1 <= middle + 15 for b in prose) and any(b.x0 >= middle - 15 for b in prose)
    for block in blocks:  # an equation typeset as a line of text (set apart: alone, or indented), its number last
        for line in block.lines:
            if (m := _TRAILING_NUMBER.search(line.text)) and _MATH.search(line.text) and not _PROSE.search(line.text) \
                    and (len(block.lines) == 1 or line.x0 >= block.x0 + INDENT):
                line.text = _numbered(line.text[:m.start()].rstrip(" ,"), m[1])
                block.equation = block.equation or len(block.lines) == 1
    numbers = [(line, block) for block in blocks for line in block.lines if _NUMBER.match(line.text)
               and (piece[id(block)] or line is block.lines[0])][:MAX_NUMBERS]
    used: set[int] = set()
    out: list[_Block] = []
    for number, home in numbers:
        if id(home) in used:
            continue
        # the number's column, on a page of two columns; else the whole page
        side = "right" if number.x0 >= middle - 15 else "left"
        column = [b for b in blocks if not two_columns or (b.x0 >= middle - 15 if side == "right" else
                                                           b.x1 <= middle + 15)]
        if number.x1 < max((b.x1 for b in column if not piece[id(b)]), default=number.x1) - RIGHT_REACH:
            continue  # not at the right of its column: a label, not an equation's number
        free = [b for b in column if b is not home and id(b) not in used and piece[id(b)]]
        pieces = [b for b in free if _overlaps(b, number.y0, number.y1)]
        if pieces:
            top, bottom = min(b.y0 for b in pieces), max(b.y1 for b in pieces)
            pieces += [b for b in free if b not in pieces and _overlaps(b, top, bottom)]
        else:  # the number below its equation's last line
            above = [b for b in free if b.y1 <= number.y1 and number.y0 - b.y1 <= number.size]
            pieces = [max(above, key=lambda b: b.y1)] if above else []
        if not pieces or any(b.equation for b in pieces):
            continue
        if piece[id(home)]:
            pieces.append(home)
        else:
            home.lines.remove(number)
        used.update(id(b) for b in pieces)
        out.append(_Block([_equation_line(pieces, number)], number.page, equation=True))
    rest = [b for b in blocks if id(b) not in used]
    for block in rest:
        if not block.equation and _unnumbered(block, prose):
            block.equation = True
    return rest + out


def _unnumbered(block: _Block, prose: list[_Block]) -> bool:
    """An equation without a number: a short piece stating a relation ("d(PA, PB) = ∥vA −vB∥2,") set between two
    paragraphs of its column, close above and below."""
    if len(block.lines) > 2 or block.n_chars > MAX_PIECE_CHARS or not _RELATION.search(block.lines[0].text) \
            or any(_PROSE.search(line.text) for line in block.lines):
        return False
    size = block.lines[0].size
    beside = [b for b in prose if b.x0 <= block.x0 and b.x1 >= block.x1]
    # a subscript's box may reach a little into the next paragraph's
    return (any(-size / 2 <= block.y0 - b.y1 <= GAP_LINES * size for b in beside)
            and any(-size / 2 <= b.y0 - block.y1 <= GAP_LINES * size for b in beside))
