"""Library tab: search arXiv and add papers, upload PDFs, list and remove, follow categories and refresh."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.types import PaperSummary
from copilot.ui.context import AppContext, fail
from copilot.ui.services import add_message

PAPER_HEADERS = ["id", "title", "authors", "year", "source", "pages", "chunks", "owner"]
SEARCH_HEADERS = ["arxiv id", "title", "authors", "published", "category"]
SEARCH_FIELDS = ["all", "title", "author", "category"]
OFFLINE_NOTICE = "⚠️ **arXiv is unavailable.** {detail}"  # the client's message says uploads still work


def paper_rows(papers: list[PaperSummary]) -> list[list[Any]]:
    rows = []
    for p in papers:
        authors = p.authors or []
        names = ", ".join(authors[:3]) + (" et al." if len(authors) > 3 else "")
        rows.append([p.id, p.title or "", names, (p.published or "")[:4], p.source or "", p.n_pages, p.n_chunks,
                     "you" if p.user_id else "shared"])
    return rows


def paper_choices(papers: list[PaperSummary]) -> list[tuple[str, str]]:
    """(label, id) pairs for paper pickers: the title first, the id to be sure."""
    return [(f"{(p.title or p.id)[:80]} ({p.id})", p.id) for p in papers]


def _reported(report: list[dict[str, Any]], key: str) -> str:
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
    from gradio.utils import get_upload_folder

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


def _search(ctx: AppContext, query: str, field: str, max_results: int) -> list[Any]:
    client = ctx.services.library.arxiv
    text = (query or "").strip()
    if field == "author":
        return client.by_author(text, max_results=max_results)
    if field == "category":
        return client.by_category(text, max_results=max_results)
    if field == "title":
        return client.search(f'ti:"{text}"' if text else "", max_results=max_results)
    return client.search(text, max_results=max_results)


def build(ctx: AppContext) -> dict[str, gr.components.Component]:
    """Lay out the tab and wire its events; returns the components other tabs refresh."""
    services = ctx.services
    with gr.Tab("Library", id="library"):
        found = gr.State([])  # the last search's metadata, so adding needs no second look-up
        notice = gr.Markdown(elem_id="library-notice")
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
        papers = gr.Dataframe(headers=PAPER_HEADERS, interactive=False, label="Your library", wrap=True,
                              elem_id="papers-table")
        with gr.Row():
            remove_id = gr.Textbox(label="Paper id to remove", scale=4, elem_id="remove-id")
            remove_btn = gr.Button("Remove paper", variant="stop", scale=1, elem_id="remove-paper")
        with gr.Accordion("Keep current: followed categories", open=False):
            with gr.Row():
                categories = gr.Textbox(label="Categories you follow (comma-separated)", placeholder="cs.CL, cs.IR",
                                        scale=4, elem_id="follow-categories")
                follow_btn = gr.Button("Save", scale=1)
                refresh_btn = gr.Button("Refresh now", scale=1, elem_id="refresh-now")
            refresh_status = gr.Markdown(elem_id="refresh-status")

    def list_papers(request: gr.Request, profile: gr.OAuthProfile | None = None) -> list[list[Any]]:
        """The papers you can see: shared arXiv papers and your own uploads."""
        return paper_rows(services.papers(ctx.user(request, profile)))

    def search_arxiv(query: str, field: str, max_results: float, request: gr.Request,
                     profile: gr.OAuthProfile | None = None) -> tuple[list[list[Any]], Any, list[dict], str]:
        """Search arXiv by free text, title, author or category."""
        from ingest.errors import ArxivError, ArxivUnavailable

        if not (query or "").strip():
            raise gr.Error("Type something to search for.")
        ctx.admit(ctx.user(request, profile), "search")
        try:
            hits = _search(ctx, query, field, min(50, max(1, int(max_results or 10))))
        except ArxivUnavailable as exc:
            return [], gr.update(choices=[], value=[]), [], OFFLINE_NOTICE.format(detail=exc)
        except (ArxivError, ValueError) as exc:
            raise fail(exc) from exc
        rows = [[h.arxiv_id, h.title, ", ".join(h.authors[:3]), h.published[:10], h.primary_category] for h in hits]
        choices = [(f"{h.title[:90]} ({h.arxiv_id})", h.arxiv_id) for h in hits]
        return rows, gr.update(choices=choices, value=[]), [asdict(h) for h in hits], f"{len(hits)} papers found."

    def add_papers(refs: list[str], found: list[dict], user: str, progress: Any  # noqa: ANN401
                   ) -> tuple[str, list[list[Any]]]:
        from ingest.models import PaperMetadata

        if not any(r and r.strip() for r in refs or []):
            raise gr.Error("Choose papers from the search results (or give arXiv ids) first.")
        known = {f["arxiv_id"]: PaperMetadata(**f) for f in (found or [])}
        try:
            report = services.add_arxiv(list(refs), user, known,
                                        lambda fraction, message: progress(fraction, desc=message),
                                        quotas=not ctx.single_user)
        except ValueError as exc:  # a quota: nothing was looked up or added
            raise fail(exc) from exc
        return _reported(report, "ref"), paper_rows(services.papers(user))

    def add_selected(chosen: list[str], found: list[dict], request: gr.Request,
                     profile: gr.OAuthProfile | None = None, progress: gr.Progress = gr.Progress()
                     ) -> tuple[str, list[list[Any]]]:
        """Download, parse and index the papers chosen among the search results."""
        return add_papers(chosen, found, ctx.user(request, profile), progress)

    def add_arxiv(ids: list[str], request: gr.Request, profile: gr.OAuthProfile | None = None
                  ) -> tuple[str, list[list[Any]]]:
        """Download, parse and index arXiv papers by id or URL (e.g. ["2104.12255", "arXiv:1706.03762v7"])."""
        return add_papers(ids, [], ctx.user(request, profile), lambda *_, **__: None)

    def upload_pdfs(paths: list[str] | None, request: gr.Request, profile: gr.OAuthProfile | None = None,
                    progress: gr.Progress = gr.Progress()) -> tuple[str, list[list[Any]]]:
        """Add uploaded PDFs to your library (only you see them)."""
        user = ctx.user(request, profile)
        if not paths:
            raise gr.Error("Choose one or more PDF files first.")
        files = [Path(p) for p in paths]
        try:
            report = services.upload(files, user, lambda fraction, message: progress(fraction, desc=message),
                                     quotas=not ctx.single_user)
        except ValueError as exc:  # a quota: nothing was stored
            raise fail(exc) from exc
        finally:
            discard_uploads(files)  # stored in the library (or refused): the server's copy is not needed
        return _reported(report, "file"), paper_rows(services.papers(user))

    def remove_paper(paper_id: str, request: gr.Request, profile: gr.OAuthProfile | None = None
                     ) -> tuple[str, list[list[Any]]]:
        """Remove a paper (your uploads; shared arXiv papers only on a single-user instance)."""
        user = ctx.user(request, profile)
        try:
            result = services.remove(paper_id, user, may_remove_public=ctx.single_user)
        except ValueError as exc:
            raise fail(exc) from exc
        text = f"Removed {result['paper_id']} ({result['chunks_removed']} chunks)."
        if result["thoughts_flagged"]:
            text += f" {result['thoughts_flagged']} thoughts built on it are flagged."
        return text, paper_rows(services.papers(user))

    def follow(categories: str, request: gr.Request, profile: gr.OAuthProfile | None = None) -> str:
        """Follow arXiv categories (e.g. cs.CL, cs.IR) for the scheduled refresh."""
        from copilot.tasks.refresh import set_followed_categories

        user = ctx.user(request, profile)
        wanted = [c.strip() for c in (categories or "").replace(";", ",").split(",") if c.strip()]
        try:
            saved = set_followed_categories(services.copilot.store, user, wanted)
        except ValueError as exc:
            raise fail(exc) from exc
        return refresh_line(user, saved)

    def refresh_now(request: gr.Request, profile: gr.OAuthProfile | None = None,
                    progress: gr.Progress = gr.Progress()) -> tuple[str, list[list[Any]]]:
        """Pull the newest papers of your followed categories now."""
        from copilot.tasks.refresh import followed_categories

        user = ctx.user(request, profile)
        cats = followed_categories(services.store, user)
        if not cats:
            raise gr.Error("Follow at least one category first (e.g. cs.CL).")
        try:  # a refresh adds to the shared library: on a shared instance it counts against the user's allowances
            result = services.refresh(user, cats, lambda fraction, message: progress(fraction, desc=message),
                                      quotas=not ctx.single_user)
        except ValueError as exc:
            raise fail(exc) from exc
        text = refresh_line(user, cats)
        if result.errors:
            text += "\n\n" + "\n".join(f"- {e}" for e in result.errors)
        return text, paper_rows(services.papers(user))

    def refresh_line(user: str, cats: list[str]) -> str:
        from copilot.tasks.refresh import last_refresh

        last = last_refresh(services.copilot.store, user)
        head = f"Following: {', '.join(cats) if cats else 'nothing yet'}."
        if not last:
            return head + " Not refreshed yet."
        return head + f" Last refresh {last.finished_at}: {last.n_added} papers added."

    def refresh_state(request: gr.Request, profile: gr.OAuthProfile | None = None) -> tuple[str, str]:
        """The categories you follow and when the library was last refreshed."""
        from copilot.tasks.refresh import followed_categories

        user = ctx.user(request, profile)
        cats = followed_categories(services.copilot.store, user)
        return ", ".join(cats), refresh_line(user, cats)

    search_btn.click(search_arxiv, [query, field, max_results], [results, chosen, found, notice],
                     api_name="search_arxiv")
    query.submit(search_arxiv, [query, field, max_results], [results, chosen, found, notice],
                 api_visibility="private")
    add_evt = add_btn.click(add_selected, [chosen, found], [notice, papers], api_visibility="private")
    upload_evt = upload_btn.click(upload_pdfs, [files], [notice, papers], api_name="upload_pdfs")
    remove_evt = remove_btn.click(remove_paper, [remove_id], [notice, papers], api_name="remove_paper")
    follow_btn.click(follow, [categories], [refresh_status], api_name="follow_categories")
    refresh_evt = refresh_btn.click(refresh_now, None, [refresh_status, papers], api_name="refresh_now")
    return {"apis": [(list_papers, "list_papers"), (add_arxiv, "add_arxiv")],
            "load": [(list_papers, [], [papers]), (refresh_state, [], [categories, refresh_status])],
            "changed": [add_evt, upload_evt, remove_evt, refresh_evt]}
