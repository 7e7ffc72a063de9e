"""The Library tab's BibTeX import: a Zotero, Mendeley or Google Scholar export in, one result line per entry out.

The rule lives in :meth:`copilot.engine.Copilot.import_bibtex`; this panel shows its report. The uploaded file is
the server's temporary copy (deleted once read); a ``file`` field inside it names a PDF on the user's computer,
which is listed for them to upload and never opened here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.types import ImportedEntry
from copilot.ui.actions import action
from copilot.ui.context import AppContext

IMPORT_HEADERS = ["entry", "title", "result", "paper", "details"]
IMPORT_WIDTHS = ["15%", "30%", "13%", "10%", "32%"]
STATUS_ORDER = ["added", "already in the library", "file to upload", "DOI only", "not found", "failed"]


def import_rows(entries: list[ImportedEntry]) -> list[list[Any]]:
    return [[e.key, e.title, e.status, e.paper_id or "", e.detail] for e in entries]


def import_summary(entries: list[ImportedEntry]) -> str:
    """One line on the whole import, counts in a fixed order, and what to do with files to upload."""
    counts = Counter(e.status for e in entries)
    parts = ", ".join(f"{counts[s]} {s}" for s in STATUS_ORDER if counts[s])
    text = f"**{len(entries)} entries:** {parts}."
    if counts["file to upload"]:
        text += " Upload the listed PDFs with *Upload PDFs* above (the server never reads paths on your computer)."
    return text


def build(ctx: AppContext, papers: gr.Dataframe, rows: Callable[[str], list[list[Any]]],
          discard: Callable[[list[Path]], None]) -> dict[str, Any]:
    """Lay out the panel inside the Library tab; ``rows(user_id)`` is the library table, ``discard`` removes the
    server's copy of an upload."""
    act = action(ctx)
    with gr.Accordion("Import a BibTeX file (Zotero, Mendeley, Google Scholar)", open=False):
        gr.Markdown("Entries with an arXiv id or link are added from arXiv; entries with a DOI or a PDF on your "
                    "computer are listed, for you to upload.")
        with gr.Row():
            bib = gr.File(label="BibTeX file (.bib)", file_types=[".bib", ".bibtex", ".txt"], scale=4,
                          elem_id="bibtex-file")
            go = gr.Button("Import", variant="primary", scale=1, elem_id="bibtex-import")
        summary = gr.Markdown(elem_id="bibtex-summary")
        result = gr.Dataframe(headers=IMPORT_HEADERS, interactive=False, wrap=True, column_widths=IMPORT_WIDTHS,
                              label="Import result", elem_id="bibtex-result")

    @act
    def import_bibtex(path: str | None, user_id: str, progress: gr.Progress = gr.Progress()
                      ) -> tuple[str, list[list[Any]], list[list[Any]]]:
        """Import a BibTeX export: arXiv entries are added, DOIs and local PDFs listed, one result per entry."""
        if not path:
            raise gr.Error("Choose a BibTeX (.bib) file first.")
        try:
            ctx.admit(user_id, "arxiv_job")
            entries = ctx.copilot.import_bibtex(Path(path), user_id,
                                                lambda fraction, message: progress(fraction, desc=message),
                                                quotas=ctx.quotas)
        finally:
            discard([Path(path)])
        return import_summary(entries), import_rows(entries), rows(user_id)

    event = go.click(import_bibtex, [bib], [summary, result, papers], api_name="import_bibtex")
    return {"changed": [event]}
