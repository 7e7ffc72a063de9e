"""Reading one page: PyMuPDF's lines become clean visual lines in blocks, table cells left out.

:class:`_Line`, :class:`_Block` and :class:`_Page` are what every later stage of the parse works on.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pymupdf

from ingest.pdf.tables import has_table_caption, read_tables

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
_NUMBER = re.compile(r"^[(\[]?[-+\u2212\u00b1]?\d[\d.,]*%?[)\]*\u2020]*$")


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
    equation: bool = False  # a numbered display equation (ingest.pdf.equations): body text, however short

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
    # each table's sources: (text, region) of a table read cell by cell (Markdown, whole), or of a rule zone's rows
    tables: list[tuple[str, tuple[float, float, float, float], bool]] = field(default_factory=list)
    # the region of each figure (its graphics and its caption), by the id of its caption's first line
    figures: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)
    layout_read: bool = False  # the layout analysis ran on this page (it has a table caption)


MAX_TABLE_PAGES = 40  # pages of one document whose tables are read cell by cell (the first with a table caption)


def _read_page(page: pymupdf.Page, *, tables: bool = True) -> _Page:
    raw = page.get_text("dict", flags=_TEXT_FLAGS)
    raw_blocks = [_visual_lines(block.get("lines", []), page.number) for block in raw["blocks"]]
    captions = [line for lines in raw_blocks for line in lines if _CAPTION.match(line.text)]
    prose = [_Block(lines, page.number) for lines in raw_blocks if _is_justified(lines)]
    zones = _table_zones(page, captions, prose)
    analysed = tables and has_table_caption([c.text for c in captions])
    found = read_tables(page, _caption_blocks(raw_blocks)) if analysed else []
    structured = [pymupdf.Rect(t.bbox) for t in found]
    # A table read cell by cell stands for the rule zones it covers; its lines leave the page's text.
    zones = [z for z in zones if not any(_covers(box, z) for box in structured)]
    blocks: list[_Block] = []
    cells: list[list[_Line]] = [[] for _ in zones]
    for lines in raw_blocks:
        if structured:
            lines = [line for line in lines if _zone_of(line, structured) is None]
        if zones:
            for line in lines:
                zone = _zone_of(line, zones)
                if zone is not None:
                    cells[zone].append(line)
            lines = [line for line in lines if _zone_of(line, zones) is None]
        if lines:
            blocks.append(_Block(lines, page.number))
    n_letters = sum(sum(map(str.isalnum, line.text)) for block in blocks for line in block.lines)
    has_images = n_letters < 20 and bool(page.get_images(full=False))
    rows = [(text, _box(zone), False) for zone, zone_lines in zip(zones, cells, strict=True)
            if (text := table_rows(zone_lines))]
    rows += [(text, table.bbox, True) for table in found for text in table.sources]
    rows.sort(key=lambda t: (t[1][1], t[1][0]))
    figures = _figure_regions(page, raw_blocks) if any(_FIGURE.match(c.text) for c in captions) else {}
    return _Page(page.number, page.rect.width, page.rect.height, blocks, n_letters, has_images, rows, figures,
                 analysed)


_FIGURE = re.compile(r"^(?:Figure|Fig\.)\s*[A-Z]?\d+[.:]")
FIGURE_REACH = 450  # points: a figure's graphics stand at most this far above (or below) its caption


def _figure_regions(page: pymupdf.Page, raw_blocks: list[list[_Line]]) -> dict[int, tuple[float, float, float, float]]:
    """Each figure caption's region: its graphics (images and vector drawings across the caption's width, in the
    run just above it, else just below it, up to the nearest paragraph) and the caption itself. A caption with no
    graphics near it has its own region."""
    graphics = [pymupdf.Rect(i["bbox"]) for i in page.get_image_info()]
    graphics += [pymupdf.Rect(d["rect"]) for d in page.get_cdrawings()]
    graphics = [g for g in graphics if g.width >= 2 or g.height >= 2]
    prose = [pymupdf.Rect(min(x.x0 for x in lines), min(x.y0 for x in lines), max(x.x1 for x in lines),
                          max(x.y1 for x in lines)) for lines in raw_blocks if _is_justified(lines)]
    out = {}
    for lines in raw_blocks:
        first = next((k for k, line in enumerate(lines) if _FIGURE.match(line.text)), None)
        if first is None:
            continue
        rest = lines[first:]
        caption = pymupdf.Rect(min(x.x0 for x in rest), rest[0].y0, max(x.x1 for x in rest), max(x.y1 for x in rest))
        across = [g for g in graphics if g.x0 < caption.x1 + 20 and g.x1 > caption.x0 - 20]
        region = pymupdf.Rect(caption)
        for above in (True, False):
            if above:
                stop = max([p.y1 for p in prose if p.y1 <= caption.y0 and p.x0 < caption.x1 and p.x1 > caption.x0],
                           default=caption.y0 - FIGURE_REACH)
                near = [g for g in across if g.y1 <= caption.y0 + 2 and g.y0 >= max(stop, caption.y0 - FIGURE_REACH)]
            else:
                stop = min([p.y0 for p in prose if p.y0 >= caption.y1 and p.x0 < caption.x1 and p.x1 > caption.x0],
                           default=caption.y1 + FIGURE_REACH)
                near = [g for g in across if g.y0 >= caption.y1 - 2 and g.y1 <= min(stop, caption.y1 + FIGURE_REACH)]
            if near:
                for g in near:
                    region |= g
                break
        region &= page.rect
        out[id(lines[first])] = _box(region)
    return out


def _box(rect: pymupdf.Rect) -> tuple[float, float, float, float]:
    return (round(rect.x0, 1), round(rect.y0, 1), round(rect.x1, 1), round(rect.y1, 1))


def _covers(box: pymupdf.Rect, zone: pymupdf.Rect) -> bool:
    """Does a table's ``box`` cover most of a rule ``zone``?"""
    overlap = box & zone
    return not overlap.is_empty and overlap.get_area() >= 0.5 * zone.get_area()


def _caption_blocks(raw_blocks: list[list[_Line]]) -> list[tuple[str, pymupdf.Rect]]:
    """Each caption of the page with its region: from its "Table N" or "Figure N" line to its block's end."""
    out = []
    for lines in raw_blocks:
        for k, line in enumerate(lines):
            if _CAPTION.match(line.text):
                rest = lines[k:]
                rect = pymupdf.Rect(min(x.x0 for x in rest), line.y0, max(x.x1 for x in rest), max(x.y1 for x in rest))
                out.append((" ".join(x.text for x in rest), rect))
                break
    return out


def table_rows(lines: list[_Line]) -> str:
    """A table's lines as rows: lines whose vertical centres are within half a line of each other form one row,
    read left to right with " | " between cells; one row a line."""
    rows: list[list[_Line]] = []
    for line in sorted(lines, key=lambda ln: ((ln.y0 + ln.y1) / 2, ln.x0)):
        centre = (line.y0 + line.y1) / 2
        if rows:
            last = rows[-1]
            last_centre = sum((x.y0 + x.y1) / 2 for x in last) / len(last)
            if abs(centre - last_centre) <= 0.5 * max(line.y1 - line.y0, 1.0):
                last.append(line)
                continue
        rows.append([line])
    return "\n".join(" | ".join(x.text for x in sorted(row, key=lambda ln: ln.x0)) for row in rows).strip()


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
    return _zone_of(line, zones) is not None


def _zone_of(line: _Line, zones: list[pymupdf.Rect]) -> int | None:
    """The index of the table zone holding ``line``'s centre, or None."""
    cx, cy = (line.x0 + line.x1) / 2, (line.y0 + line.y1) / 2
    return next((k for k, z in enumerate(zones) if z.x0 <= cx <= z.x1 and z.y0 <= cy <= z.y1), None)


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
