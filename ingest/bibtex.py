"""Reading a bibliography exported from Zotero, Mendeley, JabRef or Google Scholar into typed entries.

The BibTeX itself is parsed by ``bibtexparser`` 2 (its default middleware removes the braces and quotes that
enclose values; ``SeparateCoAuthors`` splits ``author`` on ``and``); titles and names are then decoded from LaTeX
(``{\\"u}`` -> ``ü``) by pylatexenc, which bibtexparser itself depends on. Only the title and authors are
decoded: a Windows path in a ``file`` field (``C\\:\\\\Users\\\\…``) or a URL's ``\\_`` would be mangled.

What this module finds in each entry, without any network access:

- an **arXiv id**, from the first field that names one: ``eprint`` (unless ``archivePrefix``/``eprinttype`` names
  another archive), Mendeley's ``arxivId``, an arXiv DOI (``10.48550/arXiv.2104.12255``), an ``arxiv.org/abs`` or
  ``/pdf`` link in ``url``, ``howpublished`` or ``note``, or Google Scholar's ``journal = {arXiv preprint
  arXiv:1706.03762}``;
- a **DOI** (a ``doi`` field, or a ``doi.org`` link in ``url``);
- the **names of local PDF files** the entry points to: Zotero writes ``file = {Full Text PDF:/home/…/x.pdf:
  application/pdf}`` (several joined by ``;``, Windows drives as ``C\\:``), Mendeley ``{:C$\\backslash$:/Users/…/
  x.pdf:pdf}`` and JabRef ``{:x.pdf:PDF}``. Only the file's *name* is kept: the file lives on the user's machine,
  and nothing here (or downstream) ever opens such a path.

A file that is not BibTeX at all, or one in which any entry is malformed, raises :class:`BibtexError` naming the
first bad line, so an import adds all of a file or nothing of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath

import bibtexparser
from bibtexparser.middlewares import RemoveEnclosingMiddleware, SeparateCoAuthors
from bibtexparser.model import DuplicateBlockKeyBlock, Entry, ParsingFailedBlock
from pylatexenc.latex2text import LatexNodes2Text

from ingest.arxiv_client import parse_arxiv_id
from ingest.errors import IngestError, InvalidArxivId

_ARXIV_IN_TEXT = re.compile(
    r"arxiv\.org/(?:abs|pdf)/(?P<url>[\w.\-/]+?)(?:\.pdf)?(?:[?#\s}]|$)"
    r"|arxiv[:\s.]\s*(?P<bare>\d{4}\.\d{4,5}(?:v\d+)?|[a-z\-]+(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?)",
    re.IGNORECASE,
)
_ARXIV_FIELDS = ("url", "howpublished", "note", "journal", "booktitle", "publisher")
_DOI_URL = re.compile(r"^(?:https?://)?(?:dx\.)?doi\.org/", re.IGNORECASE)
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)
_ESCAPED_COLON = "\x00"


class BibtexError(IngestError):
    """The text is not a BibTeX file this import can read whole (nothing was imported)."""


@dataclass(frozen=True)
class BibEntry:
    """One bibliography entry, with what an import can act on."""

    key: str
    entry_type: str
    title: str
    authors: list[str] = field(default_factory=list)
    year: str = ""
    arxiv_id: str | None = None  # bare id, no version (``2104.12255``, ``hep-th/9901001``)
    doi: str | None = None
    files: list[str] = field(default_factory=list)  # names of the local PDFs the entry points to (never opened)


def _value(entry: Entry, name: str) -> str:
    """A field's text (field names are case-insensitive in BibTeX: Mendeley writes ``arxivId``)."""
    for f in entry.fields:
        if f.key.lower() == name:
            value = f.value
            return " ".join(value) if isinstance(value, list) else str(value or "")
    return ""


def _decoded(text: str) -> str:
    try:
        text = LatexNodes2Text(math_mode="verbatim").latex_to_text(text)
    except Exception:  # noqa: BLE001 - pylatexenc raises assorted errors on odd LaTeX; keep the raw text
        text = text.replace("{", "").replace("}", "")
    return " ".join(text.split())


def _as_arxiv(text: str) -> str | None:
    try:
        return parse_arxiv_id(text.strip())[0]
    except InvalidArxivId:
        return None


def arxiv_id_of(entry: Entry) -> str | None:
    """The arXiv id an entry names, if any (see the module docstring for where it is looked for)."""
    eprint = _value(entry, "eprint")
    archive = (_value(entry, "archiveprefix") or _value(entry, "eprinttype")).strip().lower()
    if eprint and archive in ("", "arxiv") and (found := _as_arxiv(eprint)):
        return found
    if (mendeley := _value(entry, "arxivid")) and (found := _as_arxiv(mendeley)):
        return found
    if (doi := _ARXIV_DOI.match(_DOI_URL.sub("", _value(entry, "doi").strip()))) and (found := _as_arxiv(doi["id"])):
        return found
    for name in _ARXIV_FIELDS:
        for match in _ARXIV_IN_TEXT.finditer(_value(entry, name)):
            if found := _as_arxiv(match["url"] or match["bare"]):
                return found
    return None


def doi_of(entry: Entry) -> str | None:
    for text in (_value(entry, "doi"), _value(entry, "url")):
        candidate = _DOI_URL.sub("", text.strip())
        if _DOI.match(candidate) and (text == _value(entry, "doi") or _DOI_URL.match(text.strip())):
            return candidate
    return None


def file_names(value: str) -> list[str]:
    """The names of the PDFs a ``file`` field lists (Zotero ``desc:path:mime``, Mendeley ``:path:pdf``, JabRef)."""
    text = value.replace("$\\backslash$", "\\").replace("\\:", _ESCAPED_COLON).replace("\\\\", "\\")
    names = []
    for part in (p.strip() for p in text.split(";")):
        pieces = [p.replace(_ESCAPED_COLON, ":") for p in part.split(":")]
        if len(pieces) >= 3:
            path, kind = ":".join(pieces[1:-1]), pieces[-1]
        elif len(pieces) == 2 and ("/" in pieces[1] or pieces[1].lower() == "pdf"):
            path, kind = pieces
        else:
            path, kind = ":".join(pieces), ""
        if not path.lower().endswith(".pdf") and "pdf" not in kind.lower():
            continue  # a snapshot (text/html) or an attachment that is not a paper
        name = (PureWindowsPath(path) if "\\" in path else PurePosixPath(path)).name
        if name and name not in names:
            names.append(name)
    return names


def _entry(entry: Entry) -> BibEntry:
    authors = _value(entry, "author")
    names = next((f.value for f in entry.fields if f.key.lower() == "author" and isinstance(f.value, list)), None)
    year = _value(entry, "year").strip() or _value(entry, "date").strip()[:4]
    return BibEntry(
        key=entry.key,
        entry_type=entry.entry_type.lower(),
        title=_decoded(_value(entry, "title")),
        authors=[_decoded(a) for a in (names if names is not None else [authors] if authors else [])],
        year=year,
        arxiv_id=arxiv_id_of(entry),
        doi=doi_of(entry),
        files=file_names(_value(entry, "file")),
    )


def parse_bibtex(text: str, *, max_entries: int = 500) -> list[BibEntry]:
    """Every entry of a BibTeX file, in file order; raises :class:`BibtexError` for a file that is not readable
    whole: nothing but comments, any malformed entry, or more than ``max_entries`` entries.

    An entry whose key repeats an earlier one's (two exports pasted together) is kept: the key is only a label.
    """
    library = bibtexparser.parse_string(text or "", append_middleware=[SeparateCoAuthors()])
    entries = list(library.entries)
    for block in sorted(library.failed_blocks, key=lambda b: b.start_line or 0):
        if isinstance(block, DuplicateBlockKeyBlock) and isinstance(block.ignore_error_block, Entry):
            # Set aside before the middleware ran: its values still carry their braces.
            for middleware in (RemoveEnclosingMiddleware(), SeparateCoAuthors()):
                middleware.transform_entry(block.ignore_error_block, library)
            entries.append(block.ignore_error_block)
            continue
        if isinstance(block, ParsingFailedBlock):
            error = block.error
            reason = " ".join((getattr(error, "abort_reason", "") or str(error) or type(error).__name__).split())
            reason = reason.replace("`", "").rstrip(" .")[:160]
            raise BibtexError(f"This is not a readable BibTeX file: the entry starting on line "
                              f"{(block.start_line or 0) + 1} is malformed ({reason}). Nothing was imported.")
    if not entries:
        raise BibtexError("No BibTeX entries found (an export from Zotero, Mendeley or Google Scholar starts "
                          "entries with @article{…} or @misc{…}). Nothing was imported.")
    if len(entries) > max_entries:
        raise BibtexError(f"This file has {len(entries)} entries; an import takes at most {max_entries}. Split it "
                          "and import the parts. Nothing was imported.")
    entries.sort(key=lambda e: e.start_line or 0)
    return [_entry(e) for e in entries]
