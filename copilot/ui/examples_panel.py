"""A first visit's way in: on an empty library, "Add example papers" brings the three newest arXiv papers of a
chosen category. Offline (arXiv's host accepts no connection within 3 s) the hint offers the upload first and the
button says arXiv cannot be reached. Shown only while the user's library is empty."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from copilot.engine import EXAMPLE_PAPERS
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.library_format import reported
from ingest.errors import ArxivUnavailable

EXAMPLE_CATEGORIES = ["cs.CL", "cs.IR", "cs.LG", "cs.AI", "cs.CV", "stat.ML", "q-bio.NC", "astro-ph.CO", "hep-th"]
LIBRARY_HINT = ("**Start here:** your library is empty. Add three recent arXiv papers of a category, or upload "
                "PDFs, search arXiv or import a BibTeX file below.")
OFFLINE_HINT = ("**Start here:** your library is empty. Upload PDFs of your own under *Upload PDFs* just below "
                "(or import a BibTeX file). arXiv cannot be reached from this server right now, so example papers "
                "and arXiv search wait until it can.")
OFFLINE_EXAMPLES = ("⚠️ **arXiv is unavailable, so no example papers can be fetched now.** Upload PDFs of your own "
                    "under *Upload PDFs* instead. ({detail})")


def build(ctx: AppContext, papers: gr.Dataframe, rows: Callable[[str], list[list[Any]]]) -> dict[str, Any]:
    """Lay out the panel (hidden until the page knows the library is empty) and wire its events."""
    act = action(ctx)
    with gr.Group(visible=False) as group:
        hint = gr.Markdown(LIBRARY_HINT, elem_id="library-hint")
        with gr.Row():
            category = gr.Dropdown(EXAMPLE_CATEGORIES, value="cs.CL", label="arXiv category", allow_custom_value=True,
                                   scale=3, elem_id="example-category")
            go = gr.Button("Add example papers", variant="primary", scale=1, elem_id="add-examples")
    notice = gr.Markdown(elem_id="examples-notice")  # outside the panel: it stays once the library fills

    @act
    def add_example_papers(category: str, user_id: str, progress: gr.Progress = gr.Progress()
                           ) -> tuple[str, list[list[Any]]]:
        """Start a library with the three newest arXiv papers of a category (e.g. cs.CL)."""
        ctx.admit(user_id, "arxiv_job")
        ctx.admit(user_id, "arxiv_add", EXAMPLE_PAPERS)
        try:
            report = ctx.copilot.add_example_papers(category or "cs.CL", user_id,
                                                    lambda fraction, message: progress(fraction, desc=message),
                                                    quotas=ctx.quotas)
        except ArxivUnavailable as exc:
            return OFFLINE_EXAMPLES.format(detail=exc), rows(user_id)
        return reported(report, "ref"), rows(user_id)

    @act
    def first_visit(user_id: str) -> tuple[Any, Any, Any]:  # noqa: ANN401 - Gradio updates
        """The panel is shown while the user's library is empty; offline, it offers the upload first."""
        if ctx.copilot.papers(user_id):
            return gr.update(visible=False), gr.skip(), gr.skip()
        if ctx.copilot.arxiv_reachable():
            return (gr.update(visible=True), LIBRARY_HINT,
                    gr.update(value="Add example papers", interactive=True, variant="primary"))
        return (gr.update(visible=True), OFFLINE_HINT,
                gr.update(value="arXiv unreachable", interactive=False, variant="secondary"))

    event = go.click(add_example_papers, [category], [notice, papers], api_name="add_example_papers")
    return {"changed": [event], "shown": (first_visit, [group, hint, go])}
