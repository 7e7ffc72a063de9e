"""The assembler: walks the blocks in reading order and builds the title, abstract, body text, sections and
references of a :class:`ParsedPaper`."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from ingest.models import Note, ParsedPaper, Section
from ingest.pdf.front import authors_from_first_page, authors_from_metadata, year_of
from ingest.pdf.margins import _body_size, _remove_running_lines
from ingest.pdf.page import _Block, _Line, _Page, table_rows
from ingest.pdf.text import _TextBuilder, _ends_sentence, _is_caption, _reading_order, _starts_paragraph, _vocabulary
from ingest.references import RefLine, split_references
from ingest.sections import Heading, HeadingDetector, first_level_size, known_kind

UNTITLED_SECTION = "Body"  # the section holding text that comes before any heading

_AFTER_ABSTRACT = re.compile(r"^(?:keywords|key words|index terms|ccs concepts)\b", re.I)
_INLINE_ABSTRACT = re.compile(r"^abstract\s*[.:\u2014\u2013-]+\s*(?P<rest>\S.*)$", re.I)


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


def _joined(lines: list[_Line]) -> str:
    """A block's lines as one text, a word hyphenated across a line end joined again."""
    text = ""
    for line in lines:
        joined = text.endswith("-") and text[-2:-1].isalpha() and line.text[:1].islower()
        text = text[:-1] + line.text if joined else f"{text} {line.text}".strip()
    return text


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
    metadata: dict[str, str] = field(default_factory=dict)
    front_lines: list[str] | None = None  # the first page's lines before the abstract (names, affiliations)
    notes: list[Note] = field(default_factory=list)  # footnotes and tables beside the body
    _noted: set[int] = field(default_factory=set)  # blocks already kept as notes
    _note_texts: set[str] = field(default_factory=set)

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
        self.figures = {key: region for page in self.pages for key, region in page.figures.items()}
        for page in self.pages:
            self.notes += [Note("table", page.number + 1, text, bbox, whole) for text, bbox, whole in page.tables
                           if text not in self._note_texts and not self._note_texts.add(text)]
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
        if not block.equation and (block.size < 0.85 * self.body_size or block.is_debris):
            self._note(block)  # footnotes and table rows are kept apart; figure labels go
            return
        new_paragraph = _starts_paragraph(self.prev, self.prev_block, line, block, self.body_size)
        if new_paragraph:
            self._flush_captions()
        if not self.sections and not self.body.length:
            self.sections.append(_SectionStart(Heading(UNTITLED_SECTION, (), 1, "section"), 0))
        self.body.add(line.text, line.page, new_paragraph=new_paragraph)
        self.prev, self.prev_block = line, block

    def _note(self, block: _Block) -> None:
        """Keep a block left out of the body as a note, once: a footnote (small text with real words) or the rows
        of a table that has no rules (mostly numbers); figure labels and other short debris are dropped."""
        if id(block) in self._noted:
            return
        self._noted.add(id(block))
        text = _joined(block.lines)
        if len(text) < 12 or not re.search(r"[A-Za-z]{3,}", text):
            return
        if text in self._note_texts:  # the same note again (a repeated marker or footer): kept once
            return
        self._note_texts.add(text)
        if block.is_debris:
            box = (round(block.x0, 1), round(block.y0, 1), round(block.x1, 1), round(block.y1, 1))
            self.notes.append(Note("table", block.page + 1, table_rows(block.lines), box))
        else:
            self.notes.append(Note("footnote", block.page + 1, text))

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

    def _keep_front_lines(self) -> None:
        """The first page's front matter, kept for the authors before it is sent on as body text."""
        if self.front_lines is None:
            self.front_lines = [line.text for b in self.front_blocks if b.page == 0 for line in b.lines
                                if id(line) not in self.title_ids]

    def _begin_body(self, heading: Heading) -> None:
        """The first section: decide what the front matter held besides title and authors."""
        self._keep_front_lines()
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
        """Write the captions held back until the paragraph they interrupted was complete. A figure's caption is a
        source of its own (kind "figure", whole, with the figure's region), never part of the body's text."""
        captions, self.pending_captions = self.pending_captions, []
        for block in captions:
            region = self.figures.get(id(block.lines[0]))
            if region is not None:
                text = _joined(block.lines)
                if text not in self._note_texts:
                    self._note_texts.add(text)
                    self.notes.append(Note("figure", block.page + 1, text, region, True))
                continue
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
        self._keep_front_lines()
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
            authors=(authors_from_metadata(self.metadata.get("author"))
                     or authors_from_first_page(self.front_lines or [])),
            year=year_of(self.metadata, self._first_page_text()),
            notes=sorted(self.notes, key=lambda n: n.page),
        )

    def _first_page_text(self) -> str:
        """The first page's lines, margins included (arXiv's stamp runs up the left margin)."""
        first = next((p for p in self.pages if p.number == 0), None)
        return "\n".join(line.text for b in first.blocks for line in b.lines) if first else ""

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
