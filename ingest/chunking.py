"""Section-aware, overlapping, token-based chunks that remember exactly where they come from.

Chunks never cross a section boundary, so a citation names one section. Windows are measured in the
embedder's own tokens (so a chunk fits the embedder's window and is embedded whole) and overlap so that a
sentence cut at one window's end is whole in the next. A window end is pulled back to a sentence end when one
is near, so chunks read as complete sentences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ingest.models import PaperChunk, ParsedPaper
from ingest.table_text import read_table

ABSTRACT_SECTION = "Abstract"
# the section a note's chunks are cited as
NOTE_SECTIONS = {"footnote": "Footnote", "table": "Table", "figure": "Figure"}
_SENTENCE_END = re.compile(r"[.!?][)\]\"']?\s")


class Tokenizer(Protocol):
    """The embedder's tokenizer (a ``transformers`` tokenizer): called on a text, it gives token offsets."""

    def __call__(self, text: str, **kwargs: Any) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ChunkingOptions:
    """Defaults: 240 tokens fits all-MiniLM-L6-v2's 256-token window with its special tokens; 32 overlap."""

    chunk_tokens: int = 240
    overlap_tokens: int = 32
    min_tokens: int = 8  # shorter pieces (a lone heading, a page number) carry nothing worth retrieving
    include_abstract: bool = True

    def __post_init__(self) -> None:
        if self.chunk_tokens < 16:
            raise ValueError("chunk_tokens must be at least 16")
        if not 0 <= self.overlap_tokens < self.chunk_tokens // 2:
            raise ValueError("overlap_tokens must be between 0 and half of chunk_tokens")


def _token_spans(tokenizer: Tokenizer, text: str) -> list[tuple[int, int]]:
    """Character span of every token of ``text``."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False,
                        verbose=False)
    return [(int(s), int(e)) for s, e in encoded["offset_mapping"] if e > s]


def _snap_to_sentence(text: str, start: int, end: int, floor: int) -> int:
    """Move ``end`` back to just after the last sentence end in ``text[floor:end]``, if there is one."""
    best = None
    for match in _SENTENCE_END.finditer(text, floor, end):
        best = match.start() + 1
    return best if best is not None and best > start else end


def split_spans(tokenizer: Tokenizer, text: str, options: ChunkingOptions) -> list[tuple[int, int, int]]:
    """Windows over ``text`` as (char_start, char_end, n_tokens)."""
    spans = _token_spans(tokenizer, text)
    windows: list[tuple[int, int, int]] = []
    i = 0
    while i < len(spans):
        j = min(i + options.chunk_tokens, len(spans))
        start, end = spans[i][0], spans[j - 1][1]
        if j < len(spans):
            # Only snap within the last quarter of the window, so chunks stay close to full size.
            floor = spans[i + (3 * (j - i)) // 4][0]
            snapped = _snap_to_sentence(text, start, end, floor)
            if snapped < end:
                end = snapped
                while j - 1 > i and spans[j - 1][0] >= end:
                    j -= 1
        windows.append((start, end, j - i))
        if j >= len(spans):
            break
        i = max(j - options.overlap_tokens, i + 1)
    return windows


def chunk_paper(paper_id: str, parsed: ParsedPaper, tokenizer: Tokenizer,
                options: ChunkingOptions | None = None) -> list[PaperChunk]:
    """Every chunk of ``parsed``: the abstract first (offsets into ``parsed.abstract``), then each section, then
    the footnotes and tables (offsets into each note's text, on its page).

    Body chunks' offsets index ``parsed.text``; their pages come from ``parsed.page_offsets``.
    """
    options = options or ChunkingOptions()
    chunks: list[PaperChunk] = []
    if options.include_abstract and parsed.abstract.strip():
        for start, end, n in split_spans(tokenizer, parsed.abstract, options):
            chunks.append(PaperChunk(paper_id, len(chunks), ABSTRACT_SECTION, parsed.abstract[start:end], 1, 1,
                                     start, end, n))
    sections = parsed.sections or []
    if not sections and parsed.text.strip():
        sections_spans = [("Body", 0, len(parsed.text))]
    else:
        sections_spans = [(s.title, s.char_start, s.char_end) for s in sections]
    for title, sec_start, sec_end in sections_spans:
        body = parsed.text[sec_start:sec_end]
        for start, end, n in split_spans(tokenizer, body, options):
            if n < options.min_tokens:
                continue
            abs_start, abs_end = sec_start + start, sec_start + end
            chunks.append(PaperChunk(
                paper_id=paper_id,
                seq=len(chunks),
                section=title,
                text=parsed.text[abs_start:abs_end],
                page_start=parsed.page_at(abs_start),
                page_end=parsed.page_at(max(abs_start, abs_end - 1)),
                char_start=abs_start,
                char_end=abs_end,
                n_tokens=n,
            ))
    for note in parsed.notes:
        section = NOTE_SECTIONS.get(note.kind, note.kind.title())
        if note.whole:  # a table's rows under its caption and header, or a figure's caption: whole
            for text, start, end, n in _table_parts(tokenizer, note.text, options.chunk_tokens):
                chunks.append(PaperChunk(paper_id, len(chunks), section, text, note.page, note.page, start, end, n,
                                         note.bbox))
            continue
        for start, end, n in split_spans(tokenizer, note.text, options):
            if n < options.min_tokens:
                continue
            chunks.append(PaperChunk(paper_id, len(chunks), section, note.text[start:end], note.page, note.page,
                                     start, end, n, note.bbox))
    return chunks


def _table_parts(tokenizer: Tokenizer, text: str, budget: int) -> list[tuple[str, int, int, int]]:
    """A whole note as its sources: (text, start, end, tokens) of each. A table whose rows would pass ``budget``
    tokens (the embedder reads no further) is cut between rows into parts of at most that many, each under the same
    caption and header; ``start`` and ``end`` span a part's rows in ``text``. A row longer than that is a part of
    its own; a figure's caption, or a table within the budget, is one source as it is."""
    n = len(_token_spans(tokenizer, text))
    table = read_table(text) if n > budget else None
    if table is None or len(table.rows) < 2 or not text.startswith(table.head):
        return [(text, 0, len(text), n)]
    head = table.head
    parts: list[tuple[str, int, int, int]] = []
    rows: list[str] = []
    start = offset = len(head) + 1  # where the part's first row, and the next row, begin
    for line in table.rows:
        if rows and len(_token_spans(tokenizer, "\n".join([head, *rows, line]))) > budget:
            part = "\n".join([head, *rows])
            parts.append((part, start, offset - 1, len(_token_spans(tokenizer, part))))
            rows, start = [], offset
        rows.append(line)
        offset += len(line) + 1
    part = "\n".join([head, *rows])
    parts.append((part, start, offset - 1, len(_token_spans(tokenizer, part))))
    return parts
