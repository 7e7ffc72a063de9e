"""Opening the file and checking it: every failure becomes a :class:`PDFError` saying what to do."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from ingest.errors import PDFError
from ingest.pdf.equations import join_equations
from ingest.pdf.page import MAX_TABLE_PAGES, _Page, _read_page


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
    metadata: dict[str, str] = field(default_factory=dict)  # PyMuPDF's doc.metadata (author, creationDate, ...)


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
                # The layout analysis of tables (about 0.5 s a page) is spent on the first pages with a table caption
                # only, so that a document of hundreds of them cannot hold the parser.
                page = _read_page(doc[number], tables=sum(p.layout_read for p in pages) < MAX_TABLE_PAGES)
            except Exception:  # a broken page must not lose the others
                unreadable.append(number + 1)
                continue
            try:
                page.blocks = join_equations(page.blocks, page.width)
            except Exception:  # noqa: BLE001 - an equation misread costs its pieces, never the page
                warnings.append(f"{label}: the equations of page {number + 1} could not be read")
            pages.append(page)
        if not pages:
            raise PDFError(f"{label} is damaged: none of its pages could be read; download it again")
        if unreadable:
            raise PDFError(f"{label} is damaged: page(s) {_ranges(unreadable)} of {doc.page_count} could not be "
                           "read; download it again")
        metadata = {k: v for k, v in (doc.metadata or {}).items() if isinstance(v, str)}
        metadata_title = (metadata.get("title") or "").strip()
        return _Document(pages, doc.page_count, metadata_title, doc.is_repaired, metadata)
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
