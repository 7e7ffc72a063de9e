"""Trends and ideas tab: trend keywords and research ideas from the user's profile and recent papers."""

from __future__ import annotations

from typing import Any

import gradio as gr

from copilot.ui.actions import action
from copilot.ui.context import AppContext


def build(ctx: AppContext) -> dict[str, Any]:
    act = action(ctx)
    with gr.Tab("Trends & ideas", id="ideas"):
        gr.Markdown("Trend keywords from your most recent papers, and 3 to 5 research ideas for your profile, "
                    "each citing the papers it came from.")
        with gr.Row():
            papers = gr.Dropdown(label="Only these papers (empty: the most recent in your library)", choices=[],
                                 multiselect=True, allow_custom_value=True, scale=4, elem_id="ideas-papers")
            go = gr.Button("Find trends and ideas", variant="primary", scale=1, elem_id="ideas-run")
        output = gr.Markdown("*Press “Find trends and ideas”: they come from your newest papers and your persona "
                             "(set it in the Profile tab).*", elem_id="ideas-output")

    @act
    def trends(paper_ids: list[str] | None, user_id: str) -> str:
        """Trend keywords and 3-5 cited research ideas from your profile and recent papers."""
        ctx.admit(user_id)
        # The engine checks the papers are this user's and falls back to their stored persona.
        return ctx.copilot.trends(user_id, paper_ids).to_markdown()

    go.click(trends, [papers], [output], api_name="trends_ideas")
    return {"papers": papers}
