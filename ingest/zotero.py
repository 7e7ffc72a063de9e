"""What a Zotero item (the web API's ``data`` object of an item) names: its arXiv id, and whether an attachment is
a stored PDF. Plain values in, plain values out."""

from __future__ import annotations

from typing import Any

from ingest.bibtex import _ARXIV_DOI, _ARXIV_IN_TEXT, _DOI_URL, _as_arxiv

# Fields of an item that may carry an arXiv id or link: a preprint's archive id ("arXiv:2104.12255"), its link,
# Zotero's free-text "extra" ("arXiv: 2104.12255"), a report number.
_TEXT_FIELDS = ("archiveID", "url", "extra", "number", "publicationTitle", "repository")
# Attachments whose file Zotero keeps (a linked file or URL lives elsewhere: the web API has no bytes for it).
_STORED = ("imported_file", "imported_url")


def arxiv_id_of_item(data: dict[str, Any]) -> str | None:
    """The bare arXiv id a Zotero item names (from its DOI, archive id, link or extra field), if any."""
    doi = _DOI_URL.sub("", str(data.get("DOI") or "").strip())
    if (match := _ARXIV_DOI.match(doi)) and (found := _as_arxiv(match["id"])):
        return found
    for name in _TEXT_FIELDS:
        for match in _ARXIV_IN_TEXT.finditer(str(data.get(name) or "")):
            if found := _as_arxiv(match["url"] or match["bare"]):
                return found
    return None


def is_stored_pdf(data: dict[str, Any]) -> bool:
    """Is this item a PDF attachment whose file Zotero stores (so the web API can hand its bytes)?"""
    return (data.get("itemType") == "attachment" and data.get("contentType") == "application/pdf"
            and data.get("linkMode") in _STORED)
