"""What the Library tab and its panels share: the library table's rows and columns, paper pickers' choices, the
notice of a batch of additions, and the clean-up of the server's copies of uploads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from copilot.errors import plural, without_paths
from copilot.types import PaperSummary

PAPER_HEADERS = ["id", "title", "authors", "year", "source", "pages", "chunks", "owner"]
# Fixed widths for the short columns, so that authors and year are never squeezed to one letter; the title takes
# the rest and wraps.
PAPER_WIDTHS = ["12%", "33%", "22%", "6%", "7%", "6%", "7%", "7%"]
OFFLINE_NOTICE = "⚠️ **arXiv is unavailable.** {detail}"  # the client's message says uploads still work
GONE_UPLOAD = "this upload is no longer on the server (added already, or expired): choose the file again"
MAX_FAILURES_SHOWN = 3  # a refusal of a whole batch names this many of its files, then counts the rest


def paper_rows(papers: list[PaperSummary]) -> list[list[Any]]:
    rows = []
    for p in papers:
        authors = p.authors or []
        names = ", ".join(authors[:3]) + (" et al." if len(authors) > 3 else "")
        rows.append([p.id, p.title or "", names, (p.published or "")[:4], p.source or "", p.n_pages, p.n_chunks,
                     "shared" if p.shared else "you"])
    return rows


def paper_label(paper: PaperSummary) -> str:
    """A paper as a picker names it: "title (first author, year)", the id only when it has no title."""
    title = " ".join((paper.title or "").split())
    title = title if len(title) <= 80 else title[:79].rstrip() + "…"
    first = (paper.authors or [""])[0].split()
    who = ", ".join(x for x in [(first[-1] + (" et al." if len(paper.authors or []) > 1 else "")) if first else "",
                                (paper.published or "")[:4]] if x)
    if not title:
        return f"{paper.id} ({who})" if who else paper.id
    return f"{title} ({who})" if who else title


def paper_choices(papers: list[PaperSummary]) -> list[tuple[str, str]]:
    """(label, id) pairs for paper pickers: "title (first author, year)" shown, the id kept as the value; two papers
    with one label (an arXiv paper and your upload of it) are told apart by their ids."""
    labels = [paper_label(p) for p in papers]
    return [(f"{label} · {p.id}" if labels.count(label) > 1 else label, p.id) for label, p in zip(labels, papers,
                                                                                                 strict=True)]


def flagged(n: int, on: str) -> str:
    """" 2 thoughts built on them are flagged." ("" for none)."""
    return f" {plural(n, 'thought')} built on {on} {'is' if n == 1 else 'are'} flagged." if n else ""


def reported(report: list[dict[str, Any]], key: str) -> str:
    """The notice of a batch of additions; when every one failed, the failure itself (an API call gets an error,
    not a success whose text says otherwise)."""
    lines = [f"- {r[key]}: {without_paths(str(r['message']))}" for r in report]
    if report and not any(r["ok"] for r in report):
        named = [f"{r[key]}: {without_paths(str(r['message']))}" for r in report[:MAX_FAILURES_SHOWN]]
        rest = len(report) - len(named)
        raise gr.Error(" ".join(named) + (f" (and {plural(rest, 'other file')} not added)" if rest else ""))
    if any(not r["ok"] for r in report):
        gr.Warning(f"{sum(not r['ok'] for r in report)} of {len(report)} could not be added: see the list.")
    return "\n".join(lines)


def discard_uploads(files: list[Path]) -> None:
    """Delete the web server's temporary copies of uploaded files (only files inside its upload folder)."""
    folder = Path(get_upload_folder()).resolve()
    for file in files:
        try:
            path = Path(file).resolve()
            if path.is_relative_to(folder) and path.is_file():
                path.unlink()
                if path.parent != folder and not any(path.parent.iterdir()):
                    path.parent.rmdir()
        except OSError:
            continue  # already gone; the cache sweep removes anything left
