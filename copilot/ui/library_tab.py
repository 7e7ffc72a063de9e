"""Library tab: upload PDFs, search arXiv and add papers, import BibTeX, list, filter and remove (asked twice),
follow categories and refresh; on an empty library, example papers to start with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.ui import bibtex_panel, examples_panel, follow_panel, zotero_panel
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.library_format import (
    GONE_UPLOAD, OFFLINE_NOTICE, PAPER_HEADERS, PAPER_WIDTHS, discard_uploads, flagged, paper_choices, paper_rows,
    reported,
)
from copilot.errors import plural
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
        papers = gr.Dataframe(headers=PAPER_HEADERS, interactive=False, label="Your library", wrap=True,
                              column_widths=PAPER_WIDTHS, elem_id="papers-table", render=False)
        examples = examples_panel.build(ctx, papers, table)
        # Each action's status line stands under the control that caused it.
        with gr.Accordion("Upload PDFs", open=True):
            files = gr.File(label="PDF files", file_count="multiple", file_types=[".pdf"], elem_id="upload-files")
            upload_btn = gr.Button("Add uploaded PDFs", variant="primary", elem_id="upload-add")
            upload_notice = gr.Markdown(elem_id="upload-notice")
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
            search_notice = gr.Markdown(elem_id="search-notice")
        bibtex = bibtex_panel.build(ctx, papers, table, discard_uploads)
        zotero = zotero_panel.build(ctx, papers, table)
        matching = gr.Textbox(label="Filter your library", placeholder="words of a title, an author or an id",
                              elem_id="papers-filter")
        papers.render()
        with gr.Row():
            selected = gr.Dropdown(label="Papers to remove", choices=[], multiselect=True, allow_custom_value=True,
                                   scale=4, elem_id="remove-choices")
            select_all = gr.Button("Select all shown", scale=1, elem_id="remove-select-all")
            remove_btn = gr.Button("Remove selected…", variant="stop", scale=1, elem_id="remove-papers")
        # Removing deletes a paper's passages and flags the thoughts built on it: it is asked for twice.
        pending = gr.State([])  # the papers the confirmation names: what "Yes" removes, whatever is picked since
        with gr.Row(visible=False, elem_id="remove-confirm-row") as confirm_row:
            confirm_text = gr.Markdown(elem_id="remove-confirm-text")
            confirm_btn = gr.Button("Yes, remove them", variant="stop", scale=0, elem_id="remove-confirm")
            cancel_btn = gr.Button("Cancel", scale=0, elem_id="remove-cancel")
        remove_notice = gr.Markdown(elem_id="remove-notice")
        follow = follow_panel.build(ctx, papers)

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
        # A file the box still lists after it was added (or after the server's copy expired) is gone: it is
        # named, never its server path, and the others still go in.
        gone = [{"file": f.name, "ok": False, "message": GONE_UPLOAD} for f in files if not f.is_file()]
        files = [f for f in files if f.is_file()]
        try:
            if files:
                ctx.admit(user_id, "upload", len(files))
            report = ctx.copilot.upload(files, user_id, lambda fraction, message: progress(fraction, desc=message),
                                        quotas=ctx.quotas) if files else []
        finally:
            discard_uploads(files)  # stored in the library (or refused): the server's copy is not needed
        return reported(gone + report, "file"), paper_rows(ctx.copilot.papers(user_id))

    @act
    def remove_paper(paper_id: str, user_id: str) -> tuple[str, list[list[Any]]]:
        """Remove a paper (your uploads; shared arXiv papers only on a single-user instance)."""
        result = ctx.copilot.remove(paper_id, user_id, may_remove_public=ctx.single_user)
        text = f"Removed {result['paper_id']} ({plural(result['chunks_removed'], 'passage')})."
        text += flagged(result["thoughts_flagged"], "it")
        return text, paper_rows(ctx.copilot.papers(user_id))

    @act
    def remove_papers(paper_ids: list[str] | None, user_id: str) -> tuple[str, list[list[Any]]]:
        """Remove several papers at once (your uploads; shared arXiv papers only on a single-user instance)."""
        result = ctx.copilot.remove_many(list(paper_ids or []), user_id, may_remove_public=ctx.single_user)
        text = (f"Removed {plural(len(result['removed']), 'paper')} "
                f"({plural(result['chunks_removed'], 'passage')}).")
        text += flagged(result["thoughts_flagged"], "them")
        if result["failed"]:
            text += " Not removed: " + "; ".join(result["failed"])
        return text, paper_rows(ctx.copilot.papers(user_id))

    @act
    def confirm_removal(paper_ids: list[str] | None, user_id: str) -> tuple[Any, str, list[str]]:  # noqa: ANN401
        """Ask before removing: how many papers, which, and what goes with them."""
        wanted = [p for p in paper_ids or [] if p]
        if not wanted:
            raise gr.Error("Choose the papers to remove first (or press “Select all shown”).")
        names = {p.id: p.title or p.id for p in ctx.copilot.papers(user_id)}
        listed = "; ".join(f"*{names.get(p, p)[:70]}*" for p in wanted[:5]) + (" …" if len(wanted) > 5 else "")
        return (gr.update(visible=True), f"**Remove {plural(len(wanted), 'paper')}?** {listed}. Their passages are "
                "deleted and thoughts built on them are flagged.", wanted)

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

    searched = [search_btn.click(search_arxiv, [query, field, max_results], [results, chosen, found, search_notice],
                                 api_name="search_arxiv"),
                query.submit(search_arxiv, [query, field, max_results], [results, chosen, found, search_notice],
                             api_visibility="private")]
    add_evt = add_btn.click(add_selected, [chosen, found], [search_notice, papers], api_visibility="private")
    upload_evt = upload_btn.click(upload_pdfs, [files], [upload_notice, papers], api_name="upload_pdfs")
    # Added or refused, the box's files are gone from the server: the box is emptied for the next ones.
    upload_evt.then(lambda: None, None, [files], api_visibility="private", queue=False)
    remove_btn.click(confirm_removal, [selected], [confirm_row, confirm_text, pending], api_visibility="private")
    closed = (lambda: (gr.update(visible=False), []), None, [confirm_row, pending])
    cancel_btn.click(*closed, api_visibility="private", queue=False)
    selected.change(*closed, api_visibility="private", queue=False)  # a new choice is asked about anew
    remove_evt = confirm_btn.click(remove_papers, [pending], [remove_notice, papers], api_name="remove_confirmed",
                                   api_visibility="private")
    remove_evt.then(*closed, api_visibility="private", queue=False)
    # One event writes the filtered table: a typed filter that changes while one is answered runs again, last, with
    # the box's value then; a chained second step could be skipped while an earlier one, answered late, wrote an
    # older filter's table over the newer one.
    matching.change(shown, [matching], [papers, selected], api_visibility="private", trigger_mode="always_last")
    select_all.click(all_shown, [matching], [selected], api_visibility="private")
    changed = [add_evt, upload_evt, remove_evt, *follow["changed"], *bibtex["changed"], *zotero["changed"],
               *examples["changed"]]
    first_visit, first_visit_outputs = examples["shown"]

    @act
    def arxiv_state(user_id: str) -> Any:  # noqa: ANN401 - a Gradio update
        """Offline (arXiv's host accepts no connection within 3 s, remembered for a minute), the search button says
        so; it is still pressed to try again."""
        return gr.update(value="Search" if ctx.copilot.arxiv_reachable() else "Search (arXiv unreachable)")

    arxiv_outputs = [search_btn]
    for event in searched:  # after each search the button says what the search found of arXiv
        event.then(arxiv_state, None, arxiv_outputs, api_visibility="private")
    for event in changed:  # the filter and the removal choices follow every change, and so does the first visit
        event.then(shown, [matching], [papers, selected], api_visibility="private", trigger_mode="always_last").then(
            first_visit, None, first_visit_outputs, api_visibility="private")
    return {"apis": [(list_papers, "list_papers"), (filter_papers, "filter_papers"), (add_arxiv, "add_arxiv"),
                     (remove_paper, "remove_paper"), (remove_papers, "remove_papers")],
            "load": [(shown, [matching], [papers, selected]), *follow["load"], (first_visit, [], first_visit_outputs),
                     (arxiv_state, [], arxiv_outputs)],
            "changed": changed}
