"""Reading order of a page's blocks, and rebuilding the text as paragraphs from its lines."""

from __future__ import annotations

import bisect
import re

from ingest.pdf.page import _CAPTION, _Block, _Line, _Page

# A sentence end, possibly followed by closing quotes or brackets, or by a footnote mark ("models.3").
_SENTENCE_END = re.compile(r"(?:[.?!:][\"\u201d\u2019')\]]*|(?<=[^\W\d_)\]])[.?!:]\d{1,2})$")
_HYPHENATED_END = re.compile(r"([^\W\d_][^\W\d_'\u2019-]*(?:-[^\W\d_]+)*)-$")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_URL_BROKEN = re.compile(r"(?:https?://|www\.)\S*[/\-_?=&#%.]$")


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


def _continued(last: str, text: str, vocabulary: set[str]) -> tuple[str, str]:
    """How the line ``text`` continues the line ``last``: ``last`` as it stays (its end hyphen dropped when the
    typesetter split a word there, see :func:`_drop_hyphen`) and the separator between them."""
    if _URL_BROKEN.search(last) and re.match(r"[a-z0-9/]", text):
        return last, ""  # a URL wrapped at the line end
    if last.endswith(("-", "\u2013")) and len(last) > 1 and last[-2].isalnum() and text[:1].isalnum():
        m = _HYPHENATED_END.search(last)
        first = _WORD.match(text)
        if last.endswith("-") and m and first and _drop_hyphen(m.group(1), first.group(0), vocabulary):
            return last[:-1], ""
        return last, ""
    return last, " "


def join_lines(lines: list[str], vocabulary: set[str] = frozenset()) -> str:
    """Lines of one paragraph or table cell on one line, joined as the page's paragraphs are: a word hyphenated at a
    line end whole again ("Con-" + "triever"), a compound kept ("BERT-" + "Base"), other lines apart by a space."""
    out = ""
    for line in lines:
        if out:
            kept, sep = _continued(out, line, vocabulary)
            out = kept + sep + line
        else:
            out = line
    return out


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
        kept, sep = _continued(last, text, self.vocabulary)
        self.parts[-1] = kept
        self.length -= len(last) - len(kept)
        return sep

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
