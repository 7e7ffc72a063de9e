"""Write tab: draft an abstract (one paper or a synthesis of several) or a related-work section."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from copilot.tasks.compare import DEFAULT_ASPECTS, MAX_PAPERS, MIN_PAPERS, Comparison, parse_aspects
from copilot.tasks.writing import Draft
from copilot.ui.actions import action
from copilot.ui.context import AppContext

SCRATCH_MAX_AGE_S = 600  # a draft's files only need to live until Gradio has copied them into its cache


def save_exports(draft: Draft, stem: str) -> tuple[str, str]:
    """The draft as Markdown and its references as BibTeX, for download.

    The files go to a private scratch folder outside the data directory, which the server never serves. Gradio
    copies what a handler returns into its cache, under a path derived from a secret seed and the file's bytes,
    so only the page that received the link can fetch it; the cache is swept after ``COPILOT_TEMP_MAX_AGE_HOURS``.
    """
    folder = scratch_folder()
    safe = safe_stem(stem, "draft")
    md = folder / f"{safe}.md"
    bib = folder / f"{safe}.bib"
    md.write_text(draft.to_markdown(), encoding="utf-8")
    bib.write_text(draft.bibtex(), encoding="utf-8")
    return str(md), str(bib)


def scratch_folder() -> Path:
    """A new private folder for files to download (see :func:`save_exports`), older ones swept first."""
    scratch = Path(tempfile.gettempdir()) / "paper-copilot-drafts"
    scratch.mkdir(mode=0o700, exist_ok=True)
    now = time.time()
    for old in scratch.iterdir():
        try:
            if now - old.stat().st_mtime > SCRATCH_MAX_AGE_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue  # another request removed it first
    return Path(tempfile.mkdtemp(dir=scratch))


def safe_stem(stem: str, default: str) -> str:
    """A file name stem of letters, digits, dots, dashes and underscores, at most 60 characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-")[:60] or default


def draft_view(draft: Draft) -> str:
    """What the page shows: the draft (with its notes and references), then what it cost."""
    seconds = draft.timings.get("total_ms", sum(draft.timings.values())) / 1000
    return draft.to_markdown() + f"\n\n*{draft.llm_calls} LLM call(s), {seconds:.1f} s.*"


def build(ctx: AppContext) -> dict[str, Any]:
    act = action(ctx)
    with gr.Tab("Write", id="write"):
        with gr.Accordion("Abstract", open=True):
            gr.Markdown("One paper: an abstract drafted from its body (never from its own abstract). "
                        "Several papers: a synthesis abstract citing them.")
            with gr.Row():
                one_paper = gr.Dropdown(label="Paper", choices=[], allow_custom_value=True, elem_id="abstract-paper",
                                        scale=3)
                abstract_btn = gr.Button("Draft abstract", variant="primary", elem_id="draft-abstract", scale=1)
            with gr.Row():
                many_papers = gr.Dropdown(label="Papers to synthesise", choices=[], multiselect=True,
                                          allow_custom_value=True, elem_id="synthesis-papers", scale=3)
                synthesis_btn = gr.Button("Draft synthesis", elem_id="draft-synthesis", scale=1)
        with gr.Accordion("Related work", open=True):
            title = gr.Textbox(label="Your paper's title", elem_id="related-title")
            abstract = gr.Textbox(label="Your paper's abstract", lines=5, elem_id="related-abstract")
            with gr.Row():
                related_papers = gr.Dropdown(label="Only these library papers (empty: all)", choices=[],
                                             multiselect=True, allow_custom_value=True, scale=3)
                use_arxiv = gr.Checkbox(label="Also search arXiv", value=False, scale=1)
            related_btn = gr.Button("Draft related work", variant="primary", elem_id="draft-related")
        output = gr.Markdown("*Choose a paper (or several) and draft an abstract, or give your title and abstract "
                             "for a related-work section; the draft appears here.*", elem_id="draft-output")
        with gr.Row():
            md_file = gr.File(label="Markdown", interactive=False, elem_id="draft-md")
            bib_file = gr.File(label="BibTeX", interactive=False, elem_id="draft-bib")
        with gr.Accordion("Compare papers", open=True):
            gr.Markdown(f"A table of {MIN_PAPERS} to {MAX_PAPERS} papers: one row a paper, one column an aspect. Each "
                        "cell comes from that paper's own text, with the sentence that shows it, or says *not "
                        "stated*; a cell the paper does not support is marked ⚠️.")
            with gr.Row():
                compare_papers = gr.Dropdown(label="Papers to compare", choices=[], multiselect=True,
                                             allow_custom_value=True, elem_id="compare-papers", scale=3)
                compare_btn = gr.Button("Compare", variant="primary", elem_id="compare-run", scale=1)
            aspects = gr.Textbox(label="Aspects (columns, separated by commas)", value=", ".join(DEFAULT_ASPECTS),
                                 elem_id="compare-aspects")
            evidence = gr.Markdown(elem_id="compare-table")
            with gr.Row():
                compare_md = gr.File(label="Markdown", interactive=False, elem_id="compare-md")
                compare_csv = gr.File(label="CSV", interactive=False, elem_id="compare-csv")
                compare_bib = gr.File(label="BibTeX", interactive=False, elem_id="compare-bib")

    def run(kind: str, user_id: str, **kwargs: Any) -> tuple[str, str, str]:  # noqa: ANN401 - the draft's options
        ctx.admit(user_id)
        draft = ctx.copilot.draft(kind, user_id, **kwargs)
        stem = f"{kind}-{kwargs.get('paper_id') or kwargs.get('title') or 'papers'}"
        md, bib = save_exports(draft, stem)
        return draft_view(draft), md, bib

    @act
    def draft_abstract(paper_id: str | None, user_id: str) -> tuple[str, str, str]:
        """Draft an abstract for one paper from its body text."""
        if not paper_id:
            raise gr.Error("Choose a paper first.")
        return run("abstract", user_id, paper_id=paper_id)

    @act
    def draft_synthesis(paper_ids: list[str] | None, user_id: str) -> tuple[str, str, str]:
        """Draft one abstract that synthesises several papers, with numbered citations."""
        return run("synthesis", user_id, paper_ids=list(paper_ids or []))

    @act
    def draft_related(title: str, abstract: str, paper_ids: list[str] | None, use_arxiv: bool, user_id: str
                      ) -> tuple[str, str, str]:
        """Draft a related-work section for your title and abstract, citing library papers (and arXiv)."""
        if use_arxiv:
            ctx.admit(user_id, "search")
        return run("related", user_id, title=(title or "").strip(), abstract=(abstract or "").strip(),
                   paper_ids=list(paper_ids) if paper_ids else None, search_arxiv=bool(use_arxiv))

    @act
    def compare(paper_ids: list[str] | None, aspect_text: str, user_id: str) -> Iterator[tuple[Any, ...]]:
        """A comparison table of the chosen papers by the named aspects, cell by cell, then its Markdown, CSV and
        BibTeX."""
        ctx.admit(user_id)
        chosen = parse_aspects(aspect_text)
        filled: Comparison | None = None
        for update in ctx.copilot.compare(user_id, list(paper_ids or []), chosen or None, quotas=ctx.quotas,
                                          address=ctx.address(user_id)):
            if isinstance(update, Comparison):
                filled = update
            if filled is not None and (update is not filled or not filled.cells):
                total = len(filled.papers) * len(filled.aspects)
                yield (filled.to_markdown(evidence=False) + f"\n\n*Filling cell "
                       f"{min(len(filled.cells) + 1, total)} of {total}…*", None, None, None)
        assert filled is not None
        folder = scratch_folder()
        files = []
        for suffix, text in (("md", filled.to_markdown()), ("csv", filled.to_csv()), ("bib", filled.bibtex())):
            path = folder / f"comparison.{suffix}"
            path.write_text(text, encoding="utf-8")
            files.append(str(path))
        yield filled.to_markdown(), *files

    outputs = [output, md_file, bib_file]
    abstract_btn.click(draft_abstract, [one_paper], outputs, api_name="draft_abstract")
    synthesis_btn.click(draft_synthesis, [many_papers], outputs, api_name="draft_synthesis")
    related_btn.click(draft_related, [title, abstract, related_papers, use_arxiv], outputs, api_name="draft_related")
    compare_btn.click(compare, [compare_papers, aspects], [evidence, compare_md, compare_csv, compare_bib],
                      api_name="compare_papers")
    return {"one_paper": one_paper, "many_papers": many_papers, "related_papers": related_papers,
            "compare_papers": compare_papers}
