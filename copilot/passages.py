"""A cited passage shown where it stands: the PDF page(s) of a chunk rendered with the chunk's words highlighted.

A chunk keeps its pages and its character offsets in the parser's clean text, but that text is not the page's:
ligatures are expanded, words hyphenated across line ends are joined, running headers, footnotes and table
cells are gone, and captions moved. So the passage is found again on the page by its words, not by offsets:
the chunk's words and the page's words (``page.get_text("words")``) are normalised alike (NFKC, which turns a
``ﬁ`` ligature into ``fi``; lower case; letters and digits only, so ``document-level`` and ``documentlevel``
meet) and a line-end hyphenation on the page (``in-`` + ``cluding``) becomes one word; then the two word
sequences are aligned (:class:`difflib.SequenceMatcher`, order-preserving) and every run of at least
``MIN_RUN`` words in common is highlighted. The search covers the chunk's pages and one page either side, as
one sequence, so a chunk that runs over a page break is found on both pages and a page attribution that is one
off still finds its passage (it is, for 4 of the 258 chunks of the four shared papers). On those papers 99.5%
of a chunk's words are found on average and at least 85% of every chunk's (``tests/test_passages.py``), in
about 1.5 ms a chunk; rendering one page at 110 DPI takes about 60 ms and gives a PNG of about 320 kB.

PyMuPDF is imported on first use (listing papers or answering needs none of it), and used under the lock the
parser holds, since PyMuPDF is not meant for concurrent use.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_RUN = 3  # words in a row that must agree for a run to count (single common words match anywhere)
PASSES = 2  # alignments after the first, over what is left (see locate)
MAX_PAGES = 2  # pages shown at most: a chunk (at most 256 tokens) spans two pages at most
HIGHLIGHT = (1.0, 0.85, 0.0)  # the highlight's colour (RGB, 0-1): a marker yellow
PAGE_GAP_PX = 12  # grey band between two rendered pages
# The longest side of a rendered page by default (COPILOT_PASSAGE_MAX_SIDE_PX), whatever its size: a US-letter page
# at 110 DPI is 935 x 1210 px, while an uploaded PDF may declare a page of 200 x 200 inches (22,000 px square at
# 110 DPI, 1.4 GB as a pixmap).
MAX_SIDE_PX = 2000

_NOT_WORD = re.compile(r"[^\w]+", re.UNICODE)

Rect = tuple[float, float, float, float]  # x0, y0, x1, y1 in PDF points


def norm(word: str) -> str:
    """A word as both sides are compared: NFKC (ligatures expanded), lower case, letters and digits only."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", word).casefold()).replace("_", "")


def chunk_words(text: str) -> list[str]:
    """The chunk's words, normalised; those with no letter or digit left out."""
    return [w for w in (norm(raw) for raw in text.split()) if w]


@dataclass
class PageWord:
    """One word of a page as compared: its normalised text, the page it is on and its boxes (two for a word
    hyphenated across a line end), each with its (block, line) so boxes on one line are joined."""

    text: str
    page: int  # 1-based
    boxes: list[tuple[Rect, tuple[int, int]]]


def page_words(raw: list[tuple[Any, ...]], page: int) -> list[PageWord]:
    """``page.get_text("words")`` of one page as comparable words, line-end hyphenations joined."""
    out: list[PageWord] = []
    pending: PageWord | None = None  # the first half of a word hyphenated at the end of its line
    for x0, y0, x1, y1, text, block, line, _ in raw:
        box = ((float(x0), float(y0), float(x1), float(y1)), (int(block), int(line)))
        word = norm(text)
        if pending is not None:
            if (int(block), int(line)) != pending.boxes[-1][1] and word:
                pending.text += word
                pending.boxes.append(box)
                out.append(pending)
                pending = None
                continue
            out.append(pending)
            pending = None
        if not word:
            continue
        entry = PageWord(word, page, [box])
        if text.endswith(("-", "\u00ad", "\u2010")) and len(text) > 1:
            pending = entry
        else:
            out.append(entry)
    if pending is not None:
        out.append(pending)
    return out


@dataclass
class Located:
    """Where a chunk's words were found: highlight rectangles by page, and the share of its words found."""

    rects: dict[int, list[Rect]]
    coverage: float
    matched: int
    words: int

    @property
    def best_page(self) -> int | None:
        """The page holding most of the passage, or None when nothing was found."""
        if not self.rects:
            return None
        return max(self.rects, key=lambda p: sum((r[2] - r[0]) * (r[3] - r[1]) for r in self.rects[p]))


def locate(text: str, pages: dict[int, list[PageWord]]) -> Located:
    """Find ``text`` among ``pages`` (page number -> its words), in page order; see the module docstring.

    The alignment keeps order, so a block the parser read in another order than the page lists it (a caption
    it moved, a column it read first) is left out by the first pass; up to ``PASSES`` more passes align what
    is left of both sides (on the test papers the mean share of a chunk's words found goes from 98.1% to 99.5%)."""
    wanted = chunk_words(text)
    sequence = [w for number in sorted(pages) for w in pages[number]]
    short = len(wanted) < 2 * MIN_RUN  # a heading-sized chunk: any agreement counts
    page_left, chunk_left = list(range(len(sequence))), list(range(len(wanted)))
    hits: list[PageWord] = []
    for _ in range(1 + PASSES):
        matcher = difflib.SequenceMatcher(None, [sequence[i].text for i in page_left],
                                          [wanted[j] for j in chunk_left], autojunk=False)
        used_page: set[int] = set()
        used_chunk: set[int] = set()
        for block in matcher.get_matching_blocks():
            if block.size >= MIN_RUN or (short and block.size):
                used_page.update(page_left[block.a:block.a + block.size])
                used_chunk.update(chunk_left[block.b:block.b + block.size])
        if not used_chunk:
            break
        hits += [sequence[i] for i in sorted(used_page)]
        page_left = [i for i in page_left if i not in used_page]
        chunk_left = [j for j in chunk_left if j not in used_chunk]
    matched = len(wanted) - len(chunk_left)
    return Located(_line_boxes(hits), matched / len(wanted) if wanted else 0.0, matched, len(wanted))


def _line_boxes(words: list[PageWord]) -> dict[int, list[Rect]]:
    """One rectangle per line of the highlighted words (the union of the line's word boxes), by page."""
    lines: dict[tuple[int, int, int], Rect] = {}
    for word in words:
        for rect, (block, line) in word.boxes:
            key = (word.page, block, line)
            if key in lines:
                a = lines[key]
                lines[key] = (min(a[0], rect[0]), min(a[1], rect[1]), max(a[2], rect[2]), max(a[3], rect[3]))
            else:
                lines[key] = rect
    out: dict[int, list[Rect]] = {}
    for (page, _, _), rect in lines.items():
        out.setdefault(page, []).append(rect)
    return out


@dataclass
class Rendered:
    """The passage's page(s) as one PNG (pages stacked top to bottom) and where its words were found."""

    png: bytes
    pages: list[int]  # the pages shown, 1-based
    located: Located
    width: int
    height: int


def render_passage(pdf: Path, text: str, page_start: int, page_end: int, *, dpi: int,
                   max_side_px: int = MAX_SIDE_PX, region: Rect | None = None, crop: bool = False) -> Rendered:
    """Render the pages of ``pdf`` that hold ``text`` (searched on ``page_start``..``page_end`` and one page
    either side) with it highlighted; when it cannot be found, ``page_start`` is shown as it is. A source with a
    ``region`` on ``page_start`` (a table read cell by cell, whose text is its rows under its caption and header,
    not the page's order of words) has that region highlighted; with ``crop`` (a figure), only the region is
    shown, with a small margin."""
    import pymupdf

    from ingest.pdf.document import _quiet_mupdf  # the parser's lock: PyMuPDF is used by one thread at a time

    with _quiet_mupdf():
        doc = pymupdf.open(pdf)
        try:
            n = doc.page_count
            first, last = max(1, page_start - 1), min(n, page_end + 1)
            if region is not None and 1 <= page_start <= n:
                size = len(chunk_words(text))
                located = Located({page_start: [tuple(region)]}, 1.0, size, size)
            else:
                words = {p: page_words(doc[p - 1].get_text("words"), p) for p in range(first, last + 1)}
                located = locate(text, words)
            shown = sorted(located.rects, key=lambda p: -len(located.rects[p]))[:MAX_PAGES]
            shown = sorted(shown) or [min(max(1, page_start), n)]
            pixmaps = []
            for number in shown:
                page = doc[number - 1]
                if located.rects.get(number) and not crop:  # a figure's crop is shown as it is
                    annot = page.add_highlight_annot([pymupdf.Rect(r) for r in located.rects[number]])
                    annot.set_colors(stroke=HIGHLIGHT)
                    annot.update()
                clip = (pymupdf.Rect(region) + (-8, -8, 8, 8)) & page.rect if crop and region is not None else None
                shown_rect = clip or page.rect
                zoom = min(dpi / 72, max_side_px / max(shown_rect.width, shown_rect.height, 1.0))
                pixmaps.append(page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), annots=True, alpha=False,
                                               clip=clip))
            png, width, height = _stack(pymupdf, pixmaps)
        finally:
            doc.close()
    return Rendered(png, shown, located, width, height)


def _stack(pymupdf: Any, pixmaps: list[Any]) -> tuple[bytes, int, int]:  # noqa: ANN401 - the PyMuPDF module
    """Pixmaps one below the other, separated by a grey band, as one PNG."""
    if len(pixmaps) == 1:
        return pixmaps[0].tobytes("png"), pixmaps[0].width, pixmaps[0].height
    width = max(p.width for p in pixmaps)
    height = sum(p.height for p in pixmaps) + PAGE_GAP_PX * (len(pixmaps) - 1)
    sheet = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    sheet.clear_with(200)
    y = 0
    for pixmap in pixmaps:
        pixmap.set_origin(0, y)
        sheet.copy(pixmap, pixmap.irect)
        y += pixmap.height + PAGE_GAP_PX
    return sheet.tobytes("png"), width, height
