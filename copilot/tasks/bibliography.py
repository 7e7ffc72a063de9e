"""Bringing a user's own bibliography in: a BibTeX export from Zotero, Mendeley or Google Scholar.

The file is parsed whole first (:func:`ingest.bibtex.parse_bibtex`): a malformed file, one over
``COPILOT_BIBTEX_MAX_KB`` or with more than ``COPILOT_BIBTEX_MAX_ENTRIES`` entries is refused with one line and
adds nothing. Then each entry is sorted by what it carries:

- an arXiv id: added from arXiv through :meth:`copilot.engine.Copilot.add_arxiv`, so the same allowances count
  (a batch with more new papers than the arXiv additions left today is refused whole) and papers already stored
  are found without a look-up; the new ones are looked up together, in one arXiv request;
- otherwise a local PDF named in its ``file`` field: listed as a file to upload. The path is on the user's own
  machine; the server never opens it (a visitor could otherwise make it read any file it can reach);
- otherwise a DOI: listed (the copilot has no DOI resolver; the DOI links to the publisher);
- otherwise nothing to fetch: "not found".
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from copilot.errors import UserError
from copilot.limits import LimitExceeded, admit_search, arxiv_additions_left
from copilot.types import ImportedEntry
from ingest.bibtex import BibEntry, BibtexError, parse_bibtex
from ingest.errors import ArxivUnavailable
from ingest.models import PaperMetadata, Progress, no_progress

if TYPE_CHECKING:
    from copilot.engine import Copilot

READ_SHARE = 0.05  # the progress bar's share of reading the file; adding from arXiv takes the rest


def read_bibtex(source: str | Path, max_kb: int) -> str:
    """The text of a BibTeX file (a path: an uploaded file) or the text itself, refused over ``max_kb``.

    Exports are UTF-8 (Zotero, Google Scholar), sometimes with a byte-order mark, or Latin-1 (older Mendeley).
    """
    if isinstance(source, Path):
        size = source.stat().st_size
        if size > max_kb * 1024:
            raise UserError(f"This BibTeX file is {size / 1024:,.0f} KB; an import reads at most {max_kb:,} KB. "
                            "Split it and import the parts.")
        data = source.read_bytes()
    else:
        data = (source or "").encode("utf-8")
        if len(data) > max_kb * 1024:
            raise UserError(f"This BibTeX text is {len(data) / 1024:,.0f} KB; an import reads at most "
                            f"{max_kb:,} KB. Split it and import the parts.")
    if b"\x00" in data[:4096] or data.startswith(b"%PDF"):
        raise UserError("This is not a BibTeX file (it is binary): export your library as BibTeX (.bib) and "
                        "import that.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _unfetched(entry: BibEntry) -> ImportedEntry:
    """An entry without an arXiv id: a file to upload, a DOI to follow, or nothing to fetch."""
    base = ImportedEntry(entry.key, entry.title, "not found", doi=entry.doi, files=list(entry.files))
    if entry.files:
        doi = f" (DOI {entry.doi})" if entry.doi else ""
        base.status, base.detail = "file to upload", f"upload {', '.join(entry.files)} from your computer{doi}"
    elif entry.doi:
        base.status, base.detail = "DOI only", f"https://doi.org/{entry.doi}"
    else:
        base.detail = "no arXiv id, DOI or PDF file in the entry"
    return base


def _add_from_arxiv(copilot: Copilot, ids: list[str], user_id: str, progress: Progress, quotas: bool
                    ) -> dict[str, dict[str, Any]]:
    """Add the arXiv papers ``ids`` name; ``{id: add_arxiv's report line}``.

    The papers not stored yet are looked up in one arXiv request (``by_ids``), not one per entry, so an import of
    50 new papers costs one of the user's arXiv requests per minute, not 50; with ``quotas`` a batch with more new
    papers than the additions left today is refused whole before that request.
    """
    if not ids:
        return {}
    store, settings = copilot.store, copilot.settings
    new = [i for i in ids if not copilot.library.resolve(i)]
    if quotas and new:
        left = arxiv_additions_left(store, settings, user_id)
        if len(new) > left:
            raise LimitExceeded(f"This file names {len(new)} arXiv papers not in the library, more than the {left} "
                                "arXiv additions you have left today: import a shorter file, or come back tomorrow.")
        admit_search(store, settings, user_id, 1)
    report: dict[str, dict[str, Any]] = {}
    known: dict[str, PaperMetadata] = {}
    if new:
        progress(READ_SHARE, f"Looking up {len(new)} papers on arXiv")
        try:
            known = {m.arxiv_id: m for m in copilot.library.arxiv.by_ids(new, skip_missing=True)}
        except ArxivUnavailable as exc:
            report |= {i: {"ref": i, "ok": False, "status": "failed", "message": f"arXiv is unavailable. {exc}"}
                       for i in new}
        else:
            report |= {i: {"ref": i, "ok": False, "status": "not found", "message": f"arXiv has no paper {i}"}
                       for i in new if i not in known}
    wanted = [i for i in ids if i not in report]
    added = copilot.add_arxiv(wanted, user_id, known, lambda f, m: progress(READ_SHARE + (1 - READ_SHARE) * f, m),
                              quotas=quotas) if wanted else []
    return report | {r["ref"]: r for r in added}


def import_bibtex(copilot: Copilot, source: str | Path, user_id: str, progress: Progress = no_progress, *,
                  quotas: bool = False) -> list[ImportedEntry]:
    """Import a BibTeX file or text for ``user_id``; one :class:`ImportedEntry` per entry, in file order."""
    settings = copilot.settings
    text = read_bibtex(source, settings.bibtex_max_kb)
    try:
        entries = parse_bibtex(text, max_entries=settings.bibtex_max_entries)
    except BibtexError as exc:
        raise UserError(str(exc)) from exc
    progress(READ_SHARE, f"Read {len(entries)} entries")
    ids = list(dict.fromkeys(e.arxiv_id for e in entries if e.arxiv_id))
    by_id = _add_from_arxiv(copilot, ids, user_id, progress, quotas)
    first: dict[str, str] = {}  # arXiv id -> the key of the first entry naming it
    out = []
    for entry in entries:
        if not entry.arxiv_id:
            out.append(_unfetched(entry))
            continue
        done = by_id.get(entry.arxiv_id, {"status": "failed", "message": "not looked up", "ok": False})
        row = ImportedEntry(entry.key, entry.title, done["status"], arxiv_id=entry.arxiv_id, doi=entry.doi,
                            files=list(entry.files), detail=done["message"])
        if done["ok"]:
            row.paper_id = entry.arxiv_id
        if entry.arxiv_id in first:
            row.status, row.detail = "already in the library", f"the same paper as entry {first[entry.arxiv_id]}"
        first.setdefault(entry.arxiv_id, entry.key)
        out.append(row)
    progress(1.0, f"Imported {len(entries)} entries")
    return out
