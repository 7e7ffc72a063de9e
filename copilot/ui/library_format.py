"""What the Library tab and its panels share: the library table's rows and columns, paper pickers' choices, the
notice of a batch of additions, and the clean-up of the server's copies of uploads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from copilot.types import PaperSummary

PAPER_HEADERS = ["id", "title", "authors", "year", "source", "pages", "chunks", "owner"]
# Fixed widths for the short columns, so that authors and year are never squeezed to one letter; the title takes
# the rest and wraps.
PAPER_WIDTHS = ["12%", "33%", "22%", "6%", "7%", "6%", "7%", "7%"]
OFFLINE_NOTICE = "⚠️ **arXiv is unavailable.** {detail}"  # the client's message says uploads still work


def paper_rows(papers: list[PaperSummary]) -> list[list[Any]]:
    rows = []
    for p in papers:
        authors = p.authors or []
        names = ", ".join(authors[:3]) + (" et al." if len(authors) > 3 else "")
        rows.append([p.id, p.title or "", names, (p.published or "")[:4], p.source or "", p.n_pages, p.n_chunks,
                     "shared" if p.shared else "you"])
    return rows


def paper_choices(papers: list[PaperSummary]) -> list[tuple[str, str]]:
    """(label, id) pairs for paper pickers: the title first, the id to be sure."""
    return [(f"{(p.title or p.id)[:80]} ({p.id})", p.id) for p in papers]


def reported(report: list[dict[str, Any]], key: str) -> str:
    """The notice of a batch of additions; when every one failed, the failure itself (an API call gets an error,
    not a success whose text says otherwise)."""
    lines = [f"- {r[key]}: {r['message']}" for r in report]
    if report and not any(r["ok"] for r in report):
        raise gr.Error(" ".join(f"{r[key]}: {r['message']}" for r in report)[:600])
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
