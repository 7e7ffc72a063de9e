"""Parsing a paper's PDF with PyMuPDF into a :class:`ParsedPaper`.

The text comes from ``page.get_text("dict")``, which gives every line with its position, font size
and font flags; the rest is layout reasoning on top of it, in this order:

1. every line is cleaned (ligatures expanded by PyMuPDF, soft hyphens and odd spaces removed, TeX's
   separate accents composed); the cells of tables are left out: on a page with a "Table N" caption, the tables
   PyMuPDF's learned layout analysis finds are read cell by cell (:mod:`ingest.pdf.tables`), and the rest are
   found by their horizontal rules (``page.get_cdrawings()``); a figure caption's region (its graphics) is found;
2. running headers, footers and page numbers are dropped: lines in the page margins that repeat on
   many pages, that are just a page number, or that sit below the bottom of the text area;
3. blocks are put in reading order, column by column on two-column pages;
4. lines are classified as title, authors (:mod:`ingest.pdf.front`, with the year), abstract, section
   headings (:mod:`ingest.sections`), body text or references (:mod:`ingest.references`), and the body is
   rebuilt as paragraphs, joining words hyphenated across line ends; footnotes and figure debris (text smaller
   than the body font, or mostly numbers) are left out, table captions are moved after the paragraph they
   interrupt, and figure captions become notes of their own with the figure's region.

PyMuPDF's learned layout analysis (``page.get_layout()``) would cover steps 2 to 4 too, but takes about half a
second per page on a CPU: it runs only on the pages with a table caption; these heuristics parse the rest of a
ten-page paper in a fraction of a second.

Each stage is a module: :mod:`ingest.pdf.document` opens the file and checks it, :mod:`ingest.pdf.page`
reads a page's lines (step 1), :mod:`ingest.pdf.margins` finds the body font and drops running lines (step 2),
:mod:`ingest.pdf.text` puts blocks in reading order and joins lines into paragraphs (step 3), and
:mod:`ingest.pdf.assembler` classifies the lines and builds the :class:`ParsedPaper` (step 4).

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

from pathlib import Path

from ingest.models import ParsedPaper
from ingest.pdf.assembler import UNTITLED_SECTION, _Assembler
from ingest.pdf.document import _check_has_text, _check_is_pdf, _label, _quiet_mupdf, _read_document, _read_source

__all__ = ["UNTITLED_SECTION", "parse_pdf"]


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
    return _Assembler(document.pages, document.n_pages, document.metadata_title, label, warnings,
                      metadata=document.metadata).run()
