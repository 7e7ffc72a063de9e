"""Layout over the whole document: the body font size, and running headers, footers and page numbers."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable

from ingest.pdf.page import _Block, _Line, _Page

_PAGE_NUMBER = re.compile(r"^(?:page\s*)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:of|/)\s*\d{1,4})?$", re.I)


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
