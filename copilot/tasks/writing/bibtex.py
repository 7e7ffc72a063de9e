"""BibTeX entries for the papers a draft cites: escaped fields, and keys that depend only on the paper."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from copilot.tasks.writing.model import Citation

_BIB_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_KEY_STOPWORDS = {"a", "an", "the", "on", "of", "for", "in", "to", "and", "with", "towards", "toward", "from", "via"}


def bib_escape(text: str) -> str:
    """``text`` safe inside a braced BibTeX field: LaTeX specials escaped, so braces always balance."""
    return re.sub(r"[\\{}&%$#_~^]", lambda m: _BIB_SPECIAL[m.group(0)], " ".join(text.split()))


def bib_verbatim(text: str) -> str:
    """An identifier or URL as BibTeX reads it verbatim: only what would unbalance the braces is dropped."""
    return re.sub(r"[{}\\\s]", "", text)


def _ascii_word(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower())


def bibtex_key(citation: Citation) -> str:
    """A key that depends only on the paper: first author's surname, year, first significant title word."""
    names = citation.author_list[0].split() if citation.author_list else []
    surname = _ascii_word(names[-1]) if names else ""
    words = [_ascii_word(w) for w in re.split(r"[\s:\-–]+", citation.title)]
    word = next((w for w in words if w and w not in _KEY_STOPWORDS), "") or _ascii_word(citation.paper_id)
    return f"{surname or 'anon'}{citation.year or ''}{word[:20]}"


def bibtex_entry(citation: Citation, key: str) -> str:
    fields: list[tuple[str, str]] = [("title", "{" + bib_escape(citation.title) + "}")]
    if citation.author_list:
        fields.append(("author", " and ".join(bib_escape(a) for a in citation.author_list)))
    if citation.year:
        fields.append(("year", str(citation.year)))
    kind = "article" if citation.venue else "misc"
    if citation.venue:
        fields.append(("journal", bib_escape(citation.venue)))
    if citation.doi:
        fields.append(("doi", bib_verbatim(citation.doi)))
    if citation.arxiv_id:
        fields += [("eprint", bib_verbatim(citation.arxiv_id)), ("archivePrefix", "arXiv")]
        if citation.category:
            fields.append(("primaryClass", bib_escape(citation.category)))
    if citation.url:
        fields.append(("url", bib_verbatim(citation.url)))
    if not citation.url and not citation.arxiv_id:
        fields.append(("note", bib_escape(f"Paper Copilot library: {citation.paper_id}")))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{kind}{{{key},\n{body}\n}}"


def bibtex_entries(citations: Sequence[Citation]) -> str:
    """One entry per paper; keys made unique with a, b, c suffixes (in list order, so they are stable)."""
    used: dict[str, int] = {}
    entries = []
    for citation in citations:
        key = bibtex_key(citation)
        count = used.get(key, 0)
        used[key] = count + 1
        entries.append(bibtex_entry(citation, key if count == 0 else f"{key}{chr(ord('a') + count - 1)}"))
    return "\n\n".join(entries) + ("\n" if entries else "")

