"""Parsing a paper's PDF with PyMuPDF into a :class:`ParsedPaper`.

The text comes from ``page.get_text("dict")``, which gives every line with its position, font size
and font flags; the rest is layout reasoning on top of it, in this order:

1. every line is cleaned (ligatures expanded by PyMuPDF, soft hyphens and odd spaces removed, TeX's
   separate accents composed); the cells of tables, found by their horizontal rules
   (``page.get_cdrawings()``), are left out;
2. running headers, footers and page numbers are dropped: lines in the page margins that repeat on
   many pages, that are just a page number, or that sit below the bottom of the text area;
3. blocks are put in reading order, column by column on two-column pages;
4. lines are classified as title, abstract, section headings (:mod:`ingest.sections`), body text or
   references (:mod:`ingest.references`), and the body is rebuilt as paragraphs, joining words
   hyphenated across line ends; footnotes and figure debris (text smaller than the body font, or mostly
   numbers) are left out, and captions are moved after the paragraph they interrupt.

PyMuPDF's learned layout analysis (``page.get_layout()``) and ``page.find_tables()`` would cover steps
2 to 4, but take about a second per page on a CPU; these heuristics parse a ten-page paper in a
fraction of a second.

``ParsedPaper.text`` starts at the first section after the abstract. ``sections`` partition it: each
section runs from its heading to the next heading of any level, and ``level`` gives the tree; text
before any heading (a paper without headings) is the section ``UNTITLED_SECTION``. The References
section holds one entry per paragraph, the same strings as ``ParsedPaper.references``.

Inputs that are not usable PDFs raise :class:`PDFError` with a message a user can act on: among them a PDF
PyMuPDF cannot read whole (a page that fails to load, or pages left without text by repairing a truncated file:
a file cut to its first 30% keeps 6 of 13 pages) and one whose pages mostly have no text (a scan). A PDF that
was repaired with every page readable, or with a few scanned pages, gives a parse with ``warnings``.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import math
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from ingest.errors import PDFError
from ingest.models import ParsedPaper, Section
from ingest.references import RefLine, split_references
from ingest.sections import Heading, HeadingDetector, first_level_size, known_kind

__all__ = ["UNTITLED_SECTION", "parse_pdf"]

UNTITLED_SECTION = "Body"  # the section holding text that comes before any heading

# Without TEXT_PRESERVE_LIGATURES, MuPDF expands ligatures ("ﬁ" -> "fi") itself; images are not needed.
_TEXT_FLAGS = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP

# Fallback for ligature code points a font maps explicitly, which MuPDF passes through.
_LIGATURES = str.maketrans({
    "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st",
    "\ufb06": "st", "\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u200a": " ",
    "\u2007": " ", "\u2008": " ", "\u202f": " ", "\u200b": None, "\ufeff": None,
    "\u2010": "-", "\u2011": "-", "\ufffd": None,
})
# pdfTeX with Type 1 fonts draws accents as separate glyphs before the letter ("J\u00a8org"); these
# become combining marks after it, which NFC then composes ("J\u00f6rg").
_SPACING_ACCENTS = {
    "\u00a8": "\u0308", "\u00b4": "\u0301", "\u02c7": "\u030c", "\u02da": "\u030a", "\u02dc": "\u0303",
    "\u02dd": "\u030b", "\u00af": "\u0304", "\u02d8": "\u0306", "\u02d9": "\u0307", "\u00b8": "\u0327",
}
_ACCENT_BEFORE = re.compile("([" + "".join(_SPACING_ACCENTS) + r"])\s?([^\W\d_])")
_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi|medi|\.b$|-b$|,b$|cmbx|bx\d", re.I)
_CAPTION = re.compile(r"^(?:Figure|Fig\.|Table|Tab\.|Algorithm|Listing)\s*[A-Z]?\d+[.:]")
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:of|/)\s*\d{1,4})?$", re.I)
# A sentence end, possibly followed by closing quotes or brackets, or by a footnote mark ("models.3").
_SENTENCE_END = re.compile(r"(?:[.?!:][\"\u201d\u2019')\]]*|(?<=[^\W\d_)\]])[.?!:]\d{1,2})$")
_HYPHENATED_END = re.compile(r"([^\W\d_][^\W\d_'\u2019-]*(?:-[^\W\d_]+)*)-$")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_URL_BROKEN = re.compile(r"(?:https?://|www\.)\S*[/\-_?=&#%.]$")
_NUMBER = re.compile(r"^[(\[]?[-+\u2212\u00b1]?\d[\d.,]*%?[)\]*\u2020]*$")
_AFTER_ABSTRACT = re.compile(r"^(?:keywords|key words|index terms|ccs concepts)\b", re.I)
_INLINE_ABSTRACT = re.compile(r"^abstract\s*[.:\u2014\u2013-]+\s*(?P<rest>\S.*)$", re.I)


@dataclass
class _Line:
    """One visual line: the PyMuPDF lines of a block that share a baseline, joined left to right."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float  # dominant font size, by characters
    max_size: float  # largest font size of a character that is a letter or digit
    bold: bool  # (nearly) every letter and digit is bold
    page: int  # 0-based


@dataclass
class _Block:
    """A PyMuPDF text block, as visual lines, with the column it belongs to."""

    lines: list[_Line]
    page: int
    side: str = "full"  # "left", "right" or "full" (spans both columns, or single-column page)

    @property
    def x0(self) -> float:
        return min(line.x0 for line in self.lines)

    @property
    def x1(self) -> float:
        return max(line.x1 for line in self.lines)

    @property
    def y0(self) -> float:
        return min(line.y0 for line in self.lines)

    @property
    def y1(self) -> float:
        return max(line.y1 for line in self.lines)

    @property
    def n_chars(self) -> int:
        return sum(len(line.text) for line in self.lines)

    @functools.cached_property
    def size(self) -> float:
        """The dominant font size of the block, by characters."""
        counts: Counter[float] = Counter()
        for line in self.lines:
            counts[round(line.size, 1)] += len(line.text)
        return counts.most_common(1)[0][0]

    @functools.cached_property
    def is_debris(self) -> bool:
        """Numbers and symbols of a figure or table that ended up as text: short and without a real
        word, or mostly numbers."""
        text = " ".join(line.text for line in self.lines)
        if len(text) < 40 and not re.search(r"[a-z]{3,}", text):
            return True
        tokens = text.split()
        numbers = sum(bool(_NUMBER.match(t)) for t in tokens)
        return numbers >= 4 and numbers >= 0.4 * len(tokens)


@dataclass
class _Page:
    number: int  # 0-based
    width: float
    height: float
    blocks: list[_Block]
    n_letters: int = 0  # letters and digits on the page
    has_images: bool = False  # only looked up for pages without text: a scanned page


# --------------------------------------------------------------------------------------------------
# Public entry point


def parse_pdf(source: Path | bytes, *, name: str | None = None, min_text_pages: float = 0.5,
              max_pages: int | None = None) -> ParsedPaper:
    """Parse a paper's PDF (a path or its bytes) into clean text, title, abstract, sections and references.

    ``name`` is how messages refer to the file (defaults to the file name). Raises :class:`PDFError`
    when the input is not a usable PDF: missing, empty, not a PDF, encrypted, damaged (a page unreadable or
    emptied by repair), with text on fewer than ``min_text_pages`` of its pages (a scan), or longer than
    ``max_pages`` (checked before any page is read).
    """
    label = _label(source, name)
    data = _read_source(source, label)
    _check_is_pdf(data, label)
    warnings: list[str] = []
    with _quiet_mupdf():
        document = _read_document(data, label, warnings, max_pages)
    _check_has_text(document, label, warnings, min_text_pages)
    return _Assembler(document.pages, document.n_pages, document.metadata_title, label, warnings).run()


# --------------------------------------------------------------------------------------------------
# Opening the file: every failure becomes a PDFError saying what to do


def _label(source: Path | bytes, name: str | None) -> str:
    if name:
        return name
    if isinstance(source, (str, Path)):
        return Path(source).name
    return "the PDF"


def _read_source(source: Path | bytes, label: str) -> bytes:
    """The file's bytes; a missing or unreadable file is the user's input problem, hence a PDFError."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise PDFError(f"{label} does not exist or is not a file; check the path and try again")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PDFError(f"{label} could not be read ({exc.strerror}); check its permissions") from exc
    if not data:
        raise PDFError(f"{label} is empty (0 bytes); download or upload the PDF again")
    return data


def _check_is_pdf(data: bytes, label: str) -> None:
    """PDFs start with ``%PDF-`` (a little junk before it is tolerated by readers, so it is here too)."""
    if b"%PDF-" in data[:1024]:
        return
    head = data[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        raise PDFError(f"{label} is not a PDF but a web page (HTML); download the paper's PDF itself")
    raise PDFError(f"{label} is not a PDF (it does not start with %PDF-); upload the paper's PDF file")


_MUPDF_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_mupdf() -> Iterator[None]:
    """Keep MuPDF from printing repair messages on stderr; what matters is reported as warnings.

    MuPDF's message switches are process-wide and PyMuPDF is not meant for concurrent use, so documents are
    opened one at a time (the web app may parse two uploads at once).
    """
    tools = pymupdf.TOOLS
    with _MUPDF_LOCK:
        errors, warns = tools.mupdf_display_errors(), tools.mupdf_display_warnings()
        tools.mupdf_display_errors(False)
        tools.mupdf_display_warnings(False)
        try:
            yield
        finally:
            tools.mupdf_display_errors(errors)
            tools.mupdf_display_warnings(warns)
            tools.reset_mupdf_warnings()


@dataclass
class _Document:
    pages: list[_Page]  # the pages that could be read
    n_pages: int
    metadata_title: str
    repaired: bool


def _read_document(data: bytes, label: str, warnings: list[str], max_pages: int | None = None) -> _Document:
    """Open the PDF and read every page's lines; pages PyMuPDF cannot read are skipped with a warning."""
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises several types (FileDataError, RuntimeError, ValueError)
        raise PDFError(f"{label} is damaged and cannot be opened ({exc}); download it again") from exc
    try:
        if doc.needs_pass and not doc.authenticate(""):
            raise PDFError(f"{label} is encrypted; remove the password and upload again")
        if doc.page_count == 0:
            raise PDFError(f"{label} is damaged or truncated: no page could be read; download it again")
        if max_pages is not None and doc.page_count > max_pages:
            raise PDFError(f"{label} has {doc.page_count} pages, more than the {max_pages} a paper may have here "
                           "(COPILOT_PDF_MAX_PAGES): split it or upload the part you need")
        if doc.is_repaired:
            warnings.append(f"{label} is damaged (truncated?) and was repaired; some content may be missing")
        pages: list[_Page] = []
        unreadable: list[int] = []
        for number in range(doc.page_count):
            try:
                pages.append(_read_page(doc[number]))
            except Exception:  # a broken page must not lose the others
                unreadable.append(number + 1)
        if not pages:
            raise PDFError(f"{label} is damaged: none of its pages could be read; download it again")
        if unreadable:
            raise PDFError(f"{label} is damaged: page(s) {_ranges(unreadable)} of {doc.page_count} could not be "
                           "read; download it again")
        metadata_title = ((doc.metadata or {}).get("title") or "").strip()
        return _Document(pages, doc.page_count, metadata_title, doc.is_repaired)
    finally:
        doc.close()


def _ranges(numbers: list[int]) -> str:
    """"1-3, 7" for [1, 2, 3, 7]: short page lists for messages."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _check_has_text(document: _Document, label: str, warnings: list[str], min_text_pages: float) -> None:
    """A PDF without a text layer (a scan, blank pages, or a file damaged beyond repair) cannot be parsed;
    say which it is. So can a repaired file that lost the text of some pages (it is truncated: what is left
    would be stored as if it were the paper), and one where most pages have no text. A few pages without a
    text layer in a PDF that has text are reported as warnings."""
    pages = document.pages
    n = document.n_pages
    if sum(p.n_letters for p in pages) < 20:
        if document.repaired:
            raise PDFError(f"{label} is damaged or truncated: no text could be read; download it again")
        if any(p.has_images for p in pages):
            raise PDFError(f"{label} has no extractable text (scanned?); run OCR on it first and upload again")
        raise PDFError(f"{label} has no extractable text (its pages are blank); upload the paper's PDF")
    if document.repaired:
        empty = [p.number + 1 for p in pages if not p.n_letters and not p.has_images]
        if empty:
            raise PDFError(f"{label} is damaged or truncated: page(s) {_ranges(empty)} of {n} came out empty "
                           "after repair; download it again")
    with_text = sum(1 for p in pages if p.n_letters >= 20)
    if with_text < min_text_pages * n:
        raise PDFError(f"{label} has text on only {with_text} of its {n} pages (scanned?); run OCR on it first "
                       "and upload again")
    scanned = [p.number + 1 for p in pages if p.n_letters < 20 and p.has_images]
    if scanned:
        warnings.append(f"page(s) {_ranges(scanned)} have no text layer (scanned?); their content is missing")


# --------------------------------------------------------------------------------------------------
# Reading one page: PyMuPDF lines to clean visual lines


def _read_page(page: pymupdf.Page) -> _Page:
    raw = page.get_text("dict", flags=_TEXT_FLAGS)
    raw_blocks = [_visual_lines(block.get("lines", []), page.number) for block in raw["blocks"]]
    captions = [line for lines in raw_blocks for line in lines if _CAPTION.match(line.text)]
    prose = [_Block(lines, page.number) for lines in raw_blocks if _is_justified(lines)]
    zones = _table_zones(page, captions, prose)
    blocks: list[_Block] = []
    for lines in raw_blocks:
        if zones:
            lines = [line for line in lines if not _in_zone(line, zones)]
        if lines:
            blocks.append(_Block(lines, page.number))
    n_letters = sum(sum(map(str.isalnum, line.text)) for block in blocks for line in block.lines)
    has_images = n_letters < 20 and bool(page.get_images(full=False))
    return _Page(page.number, page.rect.width, page.rect.height, blocks, n_letters, has_images)


def _is_justified(lines: list[_Line]) -> bool:
    """Three or more lines flush with both edges of their block: a paragraph of running text."""
    if len(lines) < 3:
        return False
    x0, x1 = min(line.x0 for line in lines), max(line.x1 for line in lines)
    return sum(abs(line.x0 - x0) <= 1.5 and abs(line.x1 - x1) <= 1.5 for line in lines) >= 3


def _table_zones(page: pymupdf.Page, captions: list[_Line], prose: list[_Block]) -> list[pymupdf.Rect]:
    """Areas between the horizontal rules of a table, whose cells would otherwise read as a paragraph.

    Tables are drawn with rules of one width stacked above each other (booktabs: top, middle and
    bottom). Two rules closed by vertical lines at both ends are a framed box of text instead, and a
    single rule is a footnote separator; neither is a table. Rules in the page margins belong to running
    headers and footers. A caption or a paragraph as wide as the rules between two of them separates two
    tables stacked in one column.
    """
    rules: list[pymupdf.Rect] = []
    verticals: list[pymupdf.Rect] = []
    for drawing in page.get_cdrawings():
        r = pymupdf.Rect(drawing["rect"])
        if r.y1 < page.rect.height * 0.06 or r.y0 > page.rect.height * 0.94:
            continue
        if r.height <= 1.5 and r.width >= 40:
            rules.append(r)
        elif r.width <= 1.5 and r.height >= 8:
            verticals.append(r)
    if len(rules) < 2:
        return []
    groups: dict[tuple[int, int], list[pymupdf.Rect]] = defaultdict(list)
    for r in sorted(rules, key=lambda r: r.y0):
        key = next((k for k in groups if abs(k[0] - r.x0) <= 3 and abs(k[1] - r.x1) <= 3), None)
        groups[key or (round(r.x0), round(r.x1))].append(r)
    zones: list[pymupdf.Rect] = []
    for group in groups.values():
        runs: list[list[pymupdf.Rect]] = [[group[0]]]
        for r in group[1:]:
            above = runs[-1][-1]
            caption_between = any(
                above.y1 <= c.y0 <= r.y0 and c.x0 < above.x1 and c.x1 > above.x0 for c in captions
            )
            prose_between = any(
                above.y1 <= b.y0 and b.y1 <= r.y0 and b.x1 - b.x0 >= 0.8 * above.width
                and b.x0 < above.x1 and b.x1 > above.x0 for b in prose
            )
            if r.y0 - above.y0 > 300 or caption_between or prose_between:
                runs.append([r])
            else:
                runs[-1].append(r)
        for run in runs:
            if len(run) < 2:
                continue
            zone = pymupdf.Rect(run[0].x0 - 2, run[0].y0 - 1, run[0].x1 + 2, run[-1].y1 + 1)
            framed = len(run) == 2 and all(
                any(abs(v.x0 - x) <= 3 and v.y0 <= zone.y0 + 3 and v.y1 >= zone.y1 - 3 for v in verticals)
                for x in (zone.x0 + 2, zone.x1 - 2)
            )
            if not framed:
                zones.append(zone)
    return zones


def _in_zone(line: _Line, zones: list[pymupdf.Rect]) -> bool:
    cx, cy = (line.x0 + line.x1) / 2, (line.y0 + line.y1) / 2
    return any(z.x0 <= cx <= z.x1 and z.y0 <= cy <= z.y1 for z in zones)


def _clean(text: str) -> str:
    """Unicode-normalised text with ligatures expanded, soft hyphens removed and spaces collapsed."""
    text = text.translate(_LIGATURES)
    if _ACCENT_BEFORE.search(text):
        text = _ACCENT_BEFORE.sub(lambda m: _dotless(m[2]) + _SPACING_ACCENTS[m[1]], text)
    text = unicodedata.normalize("NFC", text)
    soft_end = text.rstrip().endswith("\u00ad")
    text = " ".join(text.replace("\u00ad", "").split())
    return text + "-" if soft_end and text and not text.endswith("-") else text


def _dotless(letter: str) -> str:
    """Accents sit on a dotless i or j in TeX; the composed letter wants the plain one."""
    return {"\u0131": "i", "\u0237": "j"}.get(letter, letter)


def _visual_lines(raw_lines: list[dict], page: int) -> list[_Line]:
    """Merge a block's PyMuPDF lines that share a baseline ("1" and "Introduction" are two of them).

    Baselines, not boxes, decide: a subscript stretches a line's box over the next line's.
    """
    items = []
    for raw in raw_lines:
        dx, dy = raw["dir"]
        if abs(dy) > 0.2 or dx <= 0:  # rotated text: arXiv stamps, axis labels
            continue
        spans = raw["spans"]
        if any(s["text"].strip() for s in spans):
            main = max(spans, key=lambda s: (s["size"], len(s["text"].strip())))
            items.append((main["origin"][1], main["size"], raw["bbox"], spans))
    items.sort(key=lambda item: item[0])
    groups: list[list[tuple]] = []
    for baseline, size, bbox, spans in items:
        if groups and baseline - groups[-1][0][0] <= 0.35 * max(size, groups[-1][0][1]):
            groups[-1].append((baseline, size, bbox, spans))
        else:
            groups.append([(baseline, size, bbox, spans)])
    return [line for group in groups if (line := _merge_group([(b, s) for _, _, b, s in group], page))]


def _merge_group(group: list[tuple], page: int) -> _Line | None:
    """One visual line from (bbox, spans) pieces: text left to right, dominant and largest size, boldness.

    Bold comes from the font flags or, for Type 1 fonts that do not set them, from the font name
    ("NimbusRomNo9L-Medi", "CMBX10").
    """
    group.sort(key=lambda item: item[0][0])
    pieces: list[str] = []
    sizes: Counter[float] = Counter()
    bold_chars = all_chars = 0
    max_size = 0.0
    prev_x1 = None
    for bbox, spans in group:
        text = "".join(s["text"] for s in spans)
        if prev_x1 is not None and pieces and bbox[0] - prev_x1 > 0.5:
            pieces.append(" ")
        pieces.append(text)
        prev_x1 = bbox[2]
        for s in spans:
            n = sum(map(str.isalnum, s["text"]))
            sizes[round(s["size"], 1)] += len(s["text"].strip())
            if n:
                all_chars += n
                max_size = max(max_size, s["size"])
                if s["flags"] & pymupdf.TEXT_FONT_BOLD or _BOLD_FONT.search(s["font"]):
                    bold_chars += n
    text = _clean("".join(pieces))
    if not text:
        return None
    x0 = min(b[0] for b, _ in group)
    y0 = min(b[1] for b, _ in group)
    x1 = max(b[2] for b, _ in group)
    y1 = max(b[3] for b, _ in group)
    size = sizes.most_common(1)[0][0]
    bold = all_chars > 0 and bold_chars >= 0.9 * all_chars
    return _Line(text, x0, y0, x1, y1, size, max_size or size, bold, page)


# --------------------------------------------------------------------------------------------------
# Layout over the whole document: body font, running headers and footers, reading order


def _body_size(pages: list[_Page]) -> float:
    """The font size of running text: the most common size by characters."""
    counts: Counter[int] = Counter()
    for page in pages:
        for block in page.blocks:
            for line in block.lines:
                counts[round(line.size)] += len(line.text)
    mode = counts.most_common(1)[0][0]
    total = weight = 0.0
    for page in pages:
        for block in page.blocks:
            for line in block.lines:
                if abs(line.size - mode) <= 0.6:
                    total += line.size * len(line.text)
                    weight += len(line.text)
    return round(total / weight, 2) if weight else float(mode)


def _margin_key(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower())


def _remove_running_lines(pages: list[_Page], body_size: float) -> None:
    """Drop running headers, footers and page numbers, in place.

    A line in the top or bottom tenth of a page goes when its text (digits ignored) repeats on many
    pages, when it is a page number, or (bottom only) when it sits below the text area of the
    paper's pages, like the proceedings line on a first page.
    """
    def zone(line: _Line, page: _Page) -> str | None:
        if line.y1 <= page.height * 0.1:
            return "top"
        if line.y0 >= page.height * 0.9:
            return "bottom"
        return None

    seen: dict[tuple[str, str], set[int]] = defaultdict(set)
    for page in pages:
        for block in page.blocks:
            for line in block.lines:
                z = zone(line, page)
                if z:
                    seen[(z, _margin_key(line.text))].add(page.number)
    min_pages = max(2, math.ceil(0.3 * len(pages)))
    repeated = {key for key, on in seen.items() if len(pages) >= 3 and len(on) >= min_pages}

    def running(line: _Line, page: _Page) -> bool:
        z = zone(line, page)
        if z is None:
            return False
        bare = re.sub(r"[|\u2013\u2014\-\u00b7\u2022()\[\]]", " ", line.text).strip()
        return (z, _margin_key(line.text)) in repeated or bool(_PAGE_NUMBER.match(bare))

    for page in pages:
        _filter_lines(page, lambda line, p=page: not running(line, p))

    bottoms = sorted(
        max(line.y1 for b in page.blocks for line in b.lines if abs(line.size - body_size) <= 0.6)
        for page in pages
        if any(abs(line.size - body_size) <= 0.6 for b in page.blocks for line in b.lines)
    )
    if bottoms:
        text_bottom = bottoms[int(0.9 * (len(bottoms) - 1))]
        limit = text_bottom + 0.6 * body_size
        for page in pages:
            _filter_lines(page, lambda line, p=page: not (line.y0 > limit and line.y0 >= p.height * 0.85))


def _filter_lines(page: _Page, keep: Callable[[_Line], bool]) -> None:
    """Keep the lines ``keep`` accepts; blocks that change are rebuilt, so no cached value is stale."""
    blocks = []
    for block in page.blocks:
        kept = [line for line in block.lines if keep(line)]
        if len(kept) == len(block.lines):
            blocks.append(block)
        elif kept:
            blocks.append(_Block(kept, block.page, block.side))
    page.blocks = blocks


def _reading_order(page: _Page) -> list[_Block]:
    """Blocks in reading order: on two-column pages, the left column before the right one.

    Blocks crossing the gutter (title, wide figures and tables) split the page into bands; within a
    band the left column is read before the right one. Blocks level with a crossing block (author
    names in a row) belong to its band.
    """
    blocks = page.blocks
    if not blocks:
        return []
    left_edge = min(b.x0 for b in blocks)
    right_edge = max(b.x1 for b in blocks)
    mid = (left_edge + right_edge) / 2
    for block in blocks:
        if block.x1 <= mid + 15:
            block.side = "left"
        elif block.x0 >= mid - 15:
            block.side = "right"
        else:
            block.side = "full"
    total = sum(b.n_chars for b in blocks) or 1
    left = sum(b.n_chars for b in blocks if b.side == "left")
    right = sum(b.n_chars for b in blocks if b.side == "right")
    if left < 0.15 * total or right < 0.15 * total:
        for block in blocks:
            block.side = "full"
        return sorted(blocks, key=lambda b: (b.y0, b.x0))
    crossing = [b for b in blocks if b.side == "full"]
    for block in blocks:
        if block.side != "full":
            height = max(block.y1 - block.y0, 1.0)
            for c in crossing:
                if min(block.y1, c.y1) - max(block.y0, c.y0) > 0.5 * height:
                    block.side = "full"
                    break
    full = sorted((b for b in blocks if b.side == "full"), key=lambda b: (b.y0, b.x0))
    bands: list[list[_Block]] = [[] for _ in range(len(full) + 1)]
    starts = [b.y0 for b in full]
    for block in blocks:
        if block.side != "full":
            bands[bisect.bisect_right(starts, block.y0)].append(block)
    ordered: list[_Block] = []
    for i, band in enumerate(bands):
        ordered += sorted((b for b in band if b.side == "left"), key=lambda b: b.y0)
        ordered += sorted((b for b in band if b.side == "right"), key=lambda b: b.y0)
        if i < len(full):
            ordered.append(full[i])
    return ordered


# --------------------------------------------------------------------------------------------------
# Rebuilding the text


def _vocabulary(pages: list[_Page]) -> set[str]:
    """Every word of the paper, to decide whether a word split at a line end keeps its hyphen."""
    words: set[str] = set()
    for page in pages:
        for block in page.blocks:
            for line in block.lines:
                words.update(w.lower() for w in _WORD.findall(line.text))
    return words


def _drop_hyphen(left: str, right: str, vocabulary: set[str]) -> bool:
    """Whether "left-" + "right" at a line end is one word hyphenated by the typesetter.

    Compounds keep their hyphen: when the first part is itself hyphenated ("state-of-the-" + "art") or a
    single letter ("V-" + "measure"), when the second part is capitalised ("BERT-" + "Base") unless the
    paper writes the joined word elsewhere, or when the paper writes the hyphenated form elsewhere and
    never the joined one.
    """
    joined, hyphenated = (left + right).lower(), f"{left}-{right}".lower()
    if not right[:1].islower():
        return joined in vocabulary and hyphenated not in vocabulary  # "SciB-" + "ERT" in a SciBERT paper
    if "-" in left or len(left) < 2:
        return False
    return not (hyphenated in vocabulary and joined not in vocabulary)


class _TextBuilder:
    """Accumulates paragraphs line by line, joining lines and tracking where each page starts."""

    def __init__(self, vocabulary: set[str]) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.page_starts: dict[int, int] = {}
        self.vocabulary = vocabulary

    def add(self, text: str, page: int, *, new_paragraph: bool) -> int:
        """Append a line, as the start of a paragraph or continuing the current one; returns its offset."""
        if not self.parts:
            sep = ""
        elif new_paragraph:
            sep = "\n\n"
        else:
            sep = self._join(text)
        self.parts.append(sep + text)
        start = self.length + len(sep)
        self.length += len(sep) + len(text)
        self.page_starts.setdefault(page, start)
        return start

    def _join(self, text: str) -> str:
        last = self.parts[-1]
        if _URL_BROKEN.search(last) and re.match(r"[a-z0-9/]", text):
            return ""  # a URL wrapped at the line end
        if last.endswith(("-", "\u2013")) and len(last) > 1 and last[-2].isalnum() and text[:1].isalnum():
            m = _HYPHENATED_END.search(last)
            first = _WORD.match(text)
            if last.endswith("-") and m and first and _drop_hyphen(m.group(1), first.group(0), self.vocabulary):
                self.parts[-1] = last[:-1]
                self.length -= 1
            return ""
        return " "

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _ends_sentence(text: str) -> bool:
    return bool(_SENTENCE_END.search(text))


def _starts_paragraph(prev: _Line | None, prev_block: _Block | None, line: _Line, block: _Block,
                      body_size: float) -> bool:
    """Whether ``line`` opens a new paragraph after ``prev``.

    Inside a block: the previous line ended a sentence and this one is indented or the previous one
    stopped short. Across blocks (columns, pages, floats): unless the previous line left a sentence
    open or this one starts in lowercase.
    """
    if prev is None:
        return True
    ends = _ends_sentence(prev.text)
    if prev_block is block:
        width = max(block.x1 - block.x0, 1.0)
        indented = line.x0 - block.x0 > 0.6 * body_size and line.x0 - prev.x0 > 3
        short = prev.x1 < block.x1 - 0.12 * width
        return ends and (indented or short)
    return ends and not line.text[:1].islower()


def _is_caption(block: _Block) -> bool:
    """"Figure 2: ...", "Table 1. ...": moved out of the way of the paragraph a float interrupts."""
    return bool(_CAPTION.match(block.lines[0].text))


def _find_title(pages: list[_Page], body_size: float) -> list[_Line]:
    """The title: the largest text in the upper part of the first page, clearly larger than the body.

    Only the first page counts: when it is missing (a damaged file), the largest text elsewhere is a
    section heading, not the title.
    """
    if not pages or pages[0].number != 0:
        return []
    page = pages[0]
    candidates = [
        line for b in page.blocks for line in b.lines
        if line.y0 < page.height * 0.45 and sum(c.isalpha() for c in line.text) >= 3
    ]
    if not candidates:
        return []
    top = max(line.max_size for line in candidates)
    if top < body_size + 1.0:
        return []
    lines = sorted((line for line in candidates if line.max_size >= top - 0.5), key=lambda line: (line.y0, line.x0))
    if re.match(r"^\d{1,2}(\.\d{1,2})*\.?\s", lines[0].text) or known_kind(lines[0].text):
        return []  # a section heading: the page holding the title is not there
    kept = lines[:1]
    for line in lines[1:4]:
        if line.y0 - kept[-1].y1 > 2.0 * top:
            break
        kept.append(line)
    return kept


@dataclass
class _SectionStart:
    heading: Heading
    start: int


@dataclass
class _Assembler:
    """Walks the blocks in reading order and builds title, abstract, body text, sections and references."""

    pages: list[_Page]
    n_pages: int
    metadata_title: str
    label: str
    warnings: list[str]
    phase: str = "front"  # "front" -> "abstract" -> "body" <-> "references"
    sections: list[_SectionStart] = field(default_factory=list)
    ref_lines: list[RefLine] = field(default_factory=list)
    ref_spans: list[tuple[int, int]] = field(default_factory=list)
    front_blocks: list[_Block] = field(default_factory=list)
    pending_captions: list[_Block] = field(default_factory=list)

    def run(self) -> ParsedPaper:
        self.body_size = _body_size(self.pages)
        _remove_running_lines(self.pages, self.body_size)
        vocabulary = _vocabulary(self.pages)
        self.body = _TextBuilder(vocabulary)
        self.abstract = _TextBuilder(vocabulary)
        self.abstract_size = 0.0
        self.ref_size = 0.0
        self.found_heading = False
        self.prev: _Line | None = None
        self.prev_block: _Block | None = None
        all_lines = [(line.text, line.max_size, line.bold) for p in self.pages for b in p.blocks for line in b.lines]
        self.detector = HeadingDetector(self.body_size, first_level_size(all_lines, self.body_size))
        title_lines = _find_title(self.pages, self.body_size)
        self.title_ids = {id(line) for line in title_lines}
        for page in self.pages:
            ordered = _reading_order(page)
            captions = [b for b in ordered if _is_caption(b)]
            for block in [b for b in ordered if not _is_caption(b)] + captions:
                self._block(block, caption=block in captions)
        self._finish()
        return self._paper(title_lines)

    # -- blocks and lines ------------------------------------------------------------------------

    def _block(self, block: _Block, *, caption: bool) -> None:
        """Route a block's lines: headings start sections, the other lines go where the phase says."""
        if self.phase == "body" and caption:
            self.pending_captions.append(block)
            return
        if self.phase == "front" and self._inline_abstract(block):
            return
        lines = block.lines
        i = 0
        while i < len(lines):
            line = lines[i]
            heading = self._heading(line)
            if heading is None:
                self._text_line(line, block)
                i += 1
                continue
            j = i + 1
            while j < len(lines) and j - i <= 2 and self._continues(heading, line, lines[j]):
                heading = Heading(f"{heading.title} {lines[j].text}", heading.number, heading.level, heading.kind)
                j += 1
            self._start_section(heading, line)
            i = j

    def _heading(self, line: _Line) -> Heading | None:
        """The heading this line starts, if the current phase admits one there."""
        if id(line) in self.title_ids:
            return None
        heading = self.detector.classify(line.text, size=line.max_size, bold=line.bold)
        if heading is None:
            return None
        if self.phase == "references" and heading.level != 1:
            return None
        if self.phase in ("front", "abstract") and heading.kind == "abstract" and self.abstract.length:
            return None
        return heading

    def _continues(self, heading: Heading, line: _Line, nxt: _Line) -> bool:
        """A heading wrapped onto a second line: same size, bold, right below, not a heading itself."""
        return (
            nxt.bold
            and abs(nxt.max_size - line.max_size) <= 0.3
            and nxt.y0 - line.y1 < line.y1 - line.y0
            and len(heading.title) + len(nxt.text) < 160
            and self.detector.classify(nxt.text, size=nxt.max_size, bold=nxt.bold, generic=False) is None
            and not _ends_sentence(heading.title)
        )

    def _inline_abstract(self, block: _Block) -> bool:
        """"Abstract. We study ..." or "Abstract—We ...": the abstract starts within the line."""
        m = _INLINE_ABSTRACT.match(block.lines[0].text)
        if not m or len(m["rest"]) < 20:
            return False
        self.phase = "abstract"
        self.abstract_size = block.size
        self.abstract.add(m["rest"], block.page, new_paragraph=True)
        for line in block.lines[1:]:
            self.abstract.add(line.text, line.page, new_paragraph=False)
        return True

    def _text_line(self, line: _Line, block: _Block) -> None:
        """A line that is not a heading: front matter, abstract, reference or body text."""
        if self.phase == "front":
            if block not in self.front_blocks and id(line) not in self.title_ids:
                self.front_blocks.append(block)
            return
        if self.phase == "abstract":
            self._abstract_line(line, block)
            return
        if self.phase == "references":
            self.ref_size = self.ref_size or block.size
            if abs(block.size - self.ref_size) > max(0.6, 0.06 * self.ref_size):
                return  # a footnote below the list, or a note a repository appended
            column = 1 if block.side == "right" else 0
            self.ref_lines.append(RefLine(line.text, line.x0, line.y0, line.y1, line.page, column))
            return
        if block.size < 0.85 * self.body_size or block.is_debris:
            return  # footnotes, table cells, figure labels
        new_paragraph = _starts_paragraph(self.prev, self.prev_block, line, block, self.body_size)
        if new_paragraph:
            self._flush_captions()
        if not self.sections and not self.body.length:
            self.sections.append(_SectionStart(Heading(UNTITLED_SECTION, (), 1, "section"), 0))
        self.body.add(line.text, line.page, new_paragraph=new_paragraph)
        self.prev, self.prev_block = line, block

    def _abstract_line(self, line: _Line, block: _Block) -> None:
        """A line of the abstract; text smaller than the abstract's own font is a footnote under it."""
        if _AFTER_ABSTRACT.match(line.text):
            self.phase = "front"  # "Keywords: ..." closes the abstract
            self._text_line(line, block)
            return
        if not self.abstract_size:
            self.abstract_size = block.size
        if block.size < 0.85 * self.abstract_size:
            return  # a footnote under the abstract
        if self.abstract.length > 3000 and _starts_paragraph(self.prev, self.prev_block, line, block, self.body_size):
            self.phase = "body"  # no heading after a very long "abstract": the body has begun
            self.detector.allow_generic = True
            self.prev = None
            self._text_line(line, block)
            return
        new_paragraph = self.abstract.length == 0 or _starts_paragraph(
            self.prev, self.prev_block, line, block, self.body_size)
        self.abstract.add(line.text, line.page, new_paragraph=new_paragraph)
        self.prev, self.prev_block = line, block

    # -- sections --------------------------------------------------------------------------------

    def _start_section(self, heading: Heading, line: _Line) -> None:
        """Write the heading into the text and start its section (the Abstract heading only starts the
        abstract, and Keywords and the like only end it)."""
        self.detector.accept(heading)
        if heading.kind == "abstract" and self.phase == "front":
            self.phase = "abstract"
            self.prev = None
            return
        if heading.kind == "front" and self.phase in ("front", "abstract"):
            self.phase = "front"
            return
        self.found_heading = True
        if self.phase in ("front", "abstract"):
            self._begin_body(heading)
        if self.phase == "references":
            self._flush_references()
        self._flush_captions()
        start = self.body.add(heading.label, line.page, new_paragraph=True)
        self.sections.append(_SectionStart(heading, start))
        self.prev, self.prev_block = None, None
        self.phase = "references" if heading.kind == "references" else "body"

    def _begin_body(self, heading: Heading) -> None:
        """The first section: decide what the front matter held besides title and authors."""
        self.detector.allow_generic = True
        self.prev = None
        if heading.kind in ("references", "appendix") and not self.abstract.length:
            self._replay_front_matter()  # a paper without body headings: its text came before
            return
        long_blocks = [b for b in self.front_blocks if b.page == 0 and b.n_chars >= 300]
        if long_blocks and not self.abstract.length:
            block = long_blocks[0]
            for line in block.lines:
                self.abstract.add(line.text, line.page, new_paragraph=not self.abstract.length)
            self.warnings.append("no 'Abstract' heading; the first paragraph was taken as the abstract")
        # Front matter is on the first page; text before the first heading on later pages is body text
        # (the first page of a damaged file may be missing).
        self._replay_front_matter(only_after_first_page=True)

    def _replay_front_matter(self, *, only_after_first_page: bool = False) -> None:
        """Send the blocks held back as possible front matter to the body after all."""
        blocks, self.front_blocks = self.front_blocks, []
        if only_after_first_page:
            blocks = [b for b in blocks if b.page != 0]
            if not blocks:
                return
        self.phase = "body"
        for block in blocks:
            for line in block.lines:
                if id(line) not in self.title_ids:
                    self._text_line(line, block)

    def _flush_captions(self) -> None:
        """Write the captions held back until the paragraph they interrupted was complete."""
        captions, self.pending_captions = self.pending_captions, []
        for block in captions:
            for i, line in enumerate(block.lines):
                self.body.add(line.text, line.page, new_paragraph=i == 0)
            self.prev, self.prev_block = block.lines[-1], block

    def _flush_references(self) -> None:
        """Split the collected reference lines into entries and write one paragraph per entry."""
        lines, self.ref_lines = self.ref_lines, []
        for group in split_references(lines):
            start = end = None
            for k, i in enumerate(group):
                offset = self.body.add(lines[i].text, lines[i].page, new_paragraph=k == 0)
                start = offset if start is None else start
                end = self.body.length
            if start is not None and end is not None:
                self.ref_spans.append((start, end))

    def _finish(self) -> None:
        if self.phase == "front":
            self._replay_front_matter()
        elif self.phase == "references":
            self._flush_references()
        self._flush_captions()

    # -- result ----------------------------------------------------------------------------------

    def _paper(self, title_lines: list[_Line]) -> ParsedPaper:
        text = self.body.text
        offsets = self._page_offsets(len(text))
        sections = self._sections(text, offsets)
        references = [text[s:e] for s, e in self.ref_spans]
        title = " ".join(line.text for line in title_lines).strip()
        if not title:
            title = self.metadata_title or Path(self.label).stem
            self.warnings.append(f"no title found on the first page; using {title!r}")
        abstract = self.abstract.text.strip()
        if not abstract:
            self.warnings.append("no abstract found")
        if not self.found_heading:
            self.warnings.append("no section headings found; the text is one untitled section")
        if not references:
            self.warnings.append("no reference list found")
        return ParsedPaper(
            title=title,
            abstract=abstract,
            text=text,
            sections=sections,
            references=references,
            n_pages=self.n_pages,
            page_offsets=offsets,
            warnings=self.warnings,
        )

    def _page_offsets(self, length: int) -> list[int]:
        """Where each page starts in the text; a page without body text starts where the next one does."""
        offsets = [length] * self.n_pages
        for page, start in self.body.page_starts.items():
            if page < self.n_pages:
                offsets[page] = start
        for i in range(self.n_pages - 2, -1, -1):
            offsets[i] = min(offsets[i], offsets[i + 1])
        if offsets:
            offsets[0] = 0
        return offsets

    def _sections(self, text: str, offsets: list[int]) -> list[Section]:
        """Each section from its heading to the next one, trailing blank space left out."""
        out: list[Section] = []
        starts = [s for s in self.sections if s.start < len(text)]
        for k, s in enumerate(starts):
            end = starts[k + 1].start if k + 1 < len(starts) else len(text)
            while end > s.start and text[end - 1].isspace():
                end -= 1
            page_start = bisect.bisect_right(offsets, s.start)
            page_end = bisect.bisect_right(offsets, max(s.start, end - 1))
            out.append(Section(s.heading.title, s.heading.level, s.start, end, max(page_start, 1),
                               max(page_end, 1)))
        return out
