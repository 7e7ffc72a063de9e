"""Library tab: search arXiv and add papers, upload PDFs, import BibTeX, list, filter and remove, follow categories
and refresh; on an empty library, example papers to start with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.ui import bibtex_panel, examples_panel
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.library_format import (
    OFFLINE_NOTICE, PAPER_HEADERS, PAPER_WIDTHS, discard_uploads, paper_choices, paper_rows, reported,
)
from ingest.errors import ArxivUnavailable
from ingest.models import PaperMetadata

__all__ = ["build", "paper_choices", "paper_rows"]

SEARCH_HEADERS = ["arxiv id", "title", "authors", "published", "category"]
SEARCH_FIELDS = ["all", "title", "author", "category"]


def build(ctx: AppContext) -> dict[str, Any]:
    """Lay out the tab and wire its events; returns the components other tabs refresh."""
    act = action(ctx)

    def table(user_id: str) -> list[list[Any]]:
        return paper_rows(ctx.copilot.papers(user_id))

    with gr.Tab("Library", id="library"):
        found = gr.State([])  # the last search's metadata, so adding needs no second look-up
        notice = gr.Markdown(elem_id="library-notice")
        papers = gr.Dataframe(headers=PAPER_HEADERS, interactive=False, label="Your library", wrap=True,
                              column_widths=PAPER_WIDTHS, elem_id="papers-table", render=False)
        examples = examples_panel.build(ctx, notice, papers, table)
        with gr.Accordion("Search arXiv", open=True):
            with gr.Row():
                query = gr.Textbox(label="Search", placeholder="e.g. thought retrieval, or an author name",
                                   scale=5, elem_id="arxiv-query")
                field = gr.Dropdown(SEARCH_FIELDS, value="all", label="In", scale=1)
                max_results = gr.Slider(1, 50, value=10, step=1, label="Results", scale=2)
                search_btn = gr.Button("Search", scale=1, elem_id="arxiv-search")
            results = gr.Dataframe(headers=SEARCH_HEADERS, interactive=False, label="arXiv results", wrap=True)
            chosen = gr.CheckboxGroup(label="Add these papers", choices=[], elem_id="arxiv-chosen")
            add_btn = gr.Button("Add selected papers", variant="primary", elem_id="arxiv-add")
        with gr.Accordion("Upload PDFs", open=True):
            files = gr.File(label="PDF files", file_count="multiple", file_types=[".pdf"], elem_id="upload-files")
            upload_btn = gr.Button("Add uploaded PDFs", variant="primary", elem_id="upload-add")
        bibtex = bibtex_panel.build(ctx, papers, table, discard_uploads)
        matching = gr.Textbox(label="Filter your library", placeholder="words of a title, an author or an id",
                              elem_id="papers-filter")
        papers.render()
        with gr.Row():
            selected = gr.Dropdown(label="Papers to remove", choices=[], multiselect=True, allow_custom_value=True,
                                   scale=4, elem_id="remove-choices")
            select_all = gr.Button("Select all shown", scale=1, elem_id="remove-select-all")
            remove_btn = gr.Button("Remove selected", variant="stop", scale=1, elem_id="remove-papers")
        with gr.Accordion("Keep current: followed categories", open=False):
            with gr.Row():
                categories = gr.Textbox(label="Categories you follow (comma-separated)", placeholder="cs.CL, cs.IR",
                                        scale=4, elem_id="follow-categories")
                follow_btn = gr.Button("Save", scale=1)
                refresh_btn = gr.Button("Refresh now", scale=1, elem_id="refresh-now")
            refresh_status = gr.Markdown(elem_id="refresh-status")

    @act
    def list_papers(user_id: str) -> list[list[Any]]:
        """The papers you can see: shared arXiv papers and your own uploads."""
        return paper_rows(ctx.copilot.papers(user_id))

    @act
    def search_arxiv(query: str, field: str, max_results: float, user_id: str
                     ) -> tuple[list[list[Any]], Any, list[dict], str]:
        """Search arXiv by free text, title, author or category."""
        if not (query or "").strip():
            raise gr.Error("Type something to search for.")
        ctx.admit(user_id, "search")
        try:
            hits = ctx.copilot.search_arxiv(query, field, min(50, max(1, int(max_results or 10))))
        except ArxivUnavailable as exc:
            return [], gr.update(choices=[], value=[]), [], OFFLINE_NOTICE.format(detail=exc)
        rows = [[h.arxiv_id, h.title, ", ".join(h.authors[:3]), h.published[:10], h.primary_category] for h in hits]
        choices = [(f"{h.title[:90]} ({h.arxiv_id})", h.arxiv_id) for h in hits]
        return rows, gr.update(choices=choices, value=[]), [asdict(h) for h in hits], f"{len(hits)} papers found."

    def add_papers(refs: list[str], found: list[dict], user_id: str, progress: Callable[..., Any]
                   ) -> tuple[str, list[list[Any]]]:
        if not any(r and r.strip() for r in refs or []):
            raise gr.Error("Choose papers from the search results (or give arXiv ids) first.")
        known = {f["arxiv_id"]: PaperMetadata(**f) for f in (found or [])}
        ctx.admit(user_id, "arxiv_job")
        ctx.admit(user_id, "arxiv_add", len([r for r in refs if r and r.strip()]))
        report = ctx.copilot.add_arxiv(list(refs), user_id, known,
                                       lambda fraction, message: progress(fraction, desc=message), quotas=ctx.quotas)
        return reported(report, "ref"), paper_rows(ctx.copilot.papers(user_id))

    @act
    def add_selected(chosen: list[str], found: list[dict], user_id: str, progress: gr.Progress = gr.Progress()
                     ) -> tuple[str, list[list[Any]]]:
        """Download, parse and index the papers chosen among the search results."""
        return add_papers(chosen, found, user_id, progress)

    @act
    def add_arxiv(ids: list[str], user_id: str) -> tuple[str, list[list[Any]]]:
        """Download, parse and index arXiv papers by id or URL (e.g. ["2104.12255", "arXiv:1706.03762v7"])."""
        return add_papers(ids, [], user_id, lambda *_, **__: None)

    @act
    def upload_pdfs(paths: list[str] | None, user_id: str, progress: gr.Progress = gr.Progress()
                    ) -> tuple[str, list[list[Any]]]:
        """Add uploaded PDFs to your library (only you see them)."""
        if not paths:
            raise gr.Error("Choose one or more PDF files first.")
        files = [Path(p) for p in paths]
        try:
            ctx.admit(user_id, "upload", len(files))
            report = ctx.copilot.upload(files, user_id, lambda fraction, message: progress(fraction, desc=message),
                                        quotas=ctx.quotas)
        finally:
            discard_uploads(files)  # stored in the library (or refused): the server's copy is not needed
        return reported(report, "file"), paper_rows(ctx.copilot.papers(user_id))

    @act
    def remove_paper(paper_id: str, user_id: str) -> tuple[str, list[list[Any]]]:
        """Remove a paper (your uploads; shared arXiv papers only on a single-user instance)."""
        result = ctx.copilot.remove(paper_id, user_id, may_remove_public=ctx.single_user)
        text = f"Removed {result['paper_id']} ({result['chunks_removed']} chunks)."
        if result["thoughts_flagged"]:
            text += f" {result['thoughts_flagged']} thoughts built on it are flagged."
        return text, paper_rows(ctx.copilot.papers(user_id))

    @act
    def remove_papers(paper_ids: list[str] | None, user_id: str) -> tuple[str, list[list[Any]]]:
        """Remove several papers at once (your uploads; shared arXiv papers only on a single-user instance)."""
        result = ctx.copilot.remove_many(list(paper_ids or []), user_id, may_remove_public=ctx.single_user)
        text = f"Removed {len(result['removed'])} papers ({result['chunks_removed']} chunks)."
        if result["thoughts_flagged"]:
            text += f" {result['thoughts_flagged']} thoughts built on them are flagged."
        if result["failed"]:
            text += " Not removed: " + "; ".join(result["failed"])
        return text, paper_rows(ctx.copilot.papers(user_id))

    @act
    def filter_papers(matching: str, user_id: str) -> list[list[Any]]:
        """The papers you can see whose id, title or authors hold every word of ``matching``."""
        return paper_rows(ctx.copilot.papers(user_id, matching or ""))

    @act
    def shown(matching: str, user_id: str) -> tuple[list[list[Any]], Any]:
        """The table as filtered, and the papers offered for removal (those shown; the selection is cleared)."""
        visible = ctx.copilot.papers(user_id, matching or "")
        return paper_rows(visible), gr.update(choices=paper_choices(visible), value=[])

    @act
    def all_shown(matching: str, user_id: str) -> list[str]:
        return [p.id for p in ctx.copilot.papers(user_id, matching or "")]

    @act
    def follow(categories: str, user_id: str) -> str:
        """Follow arXiv categories (e.g. cs.CL, cs.IR) for the scheduled refresh."""
        wanted = [c.strip() for c in (categories or "").replace(";", ",").split(",") if c.strip()]
        return refresh_line(user_id, ctx.copilot.follow(user_id, wanted))

    @act
    def refresh_now(user_id: str, progress: gr.Progress = gr.Progress()) -> tuple[str, list[list[Any]]]:
        """Pull the newest papers of your followed categories now."""
        cats = ctx.copilot.followed(user_id)
        if not cats:
            raise gr.Error("Follow at least one category first (e.g. cs.CL).")
        # A refresh adds to the shared library: on a shared instance it counts against the user's allowances.
        ctx.admit(user_id, "arxiv_job")
        result = ctx.copilot.refresh(user_id, cats, lambda fraction, message: progress(fraction, desc=message),
                                     quotas=ctx.quotas)
        text = refresh_line(user_id, cats)
        if result.errors:
            text += "\n\n" + "\n".join(f"- {e}" for e in result.errors)
        return text, paper_rows(ctx.copilot.papers(user_id))

    def refresh_line(user_id: str, cats: list[str]) -> str:
        last = ctx.copilot.last_refresh(user_id)
        head = f"Following: {', '.join(cats) if cats else 'nothing yet'}."
        if not last:
            return head + " Not refreshed yet."
        return head + f" Last refresh {last.finished_at}: {last.n_added} papers added."

    @act
    def refresh_state(user_id: str) -> tuple[str, str]:
        """The categories you follow and when the library was last refreshed."""
        cats = ctx.copilot.followed(user_id)
        return ", ".join(cats), refresh_line(user_id, cats)

    search_btn.click(search_arxiv, [query, field, max_results], [results, chosen, found, notice],
                     api_name="search_arxiv")
    query.submit(search_arxiv, [query, field, max_results], [results, chosen, found, notice],
                 api_visibility="private")
    add_evt = add_btn.click(add_selected, [chosen, found], [notice, papers], api_visibility="private")
    upload_evt = upload_btn.click(upload_pdfs, [files], [notice, papers], api_name="upload_pdfs")
    remove_evt = remove_btn.click(remove_papers, [selected], [notice, papers], api_name="remove_papers")
    matching.change(filter_papers, [matching], [papers], api_name="filter_papers", trigger_mode="always_last").then(
        shown, [matching], [papers, selected], api_visibility="private")
    select_all.click(all_shown, [matching], [selected], api_visibility="private")
    follow_btn.click(follow, [categories], [refresh_status], api_name="follow_categories")
    refresh_evt = refresh_btn.click(refresh_now, None, [refresh_status, papers], api_name="refresh_now")
    changed = [add_evt, upload_evt, remove_evt, refresh_evt, *bibtex["changed"], *examples["changed"]]
    first_visit, panel = examples["shown"]
    for event in changed:  # the filter and the removal choices follow every change, and so does the first visit
        event.then(shown, [matching], [papers, selected], api_visibility="private").then(
            first_visit, None, [panel], api_visibility="private")
    return {"apis": [(list_papers, "list_papers"), (add_arxiv, "add_arxiv"), (remove_paper, "remove_paper")],
            "load": [(shown, [matching], [papers, selected]), (refresh_state, [], [categories, refresh_status]),
                     (first_visit, [], [panel])],
            "changed": changed}
