"""Keeping the library current: the arXiv categories a user follows, the scheduled refresh's last run, and a
refresh on demand."""

from __future__ import annotations

from typing import Any

import gradio as gr

from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.errors import plural, without_paths
from copilot.ui.library_format import paper_rows


def build(ctx: AppContext, papers: gr.Dataframe) -> dict[str, Any]:
    """Lay out the panel (collapsed) and wire its events; ``papers`` is the library table a refresh updates."""
    act = action(ctx)
    with gr.Accordion("Keep current: followed categories", open=False):
        with gr.Row():
            categories = gr.Textbox(label="Categories you follow (comma-separated)", placeholder="cs.CL, cs.IR",
                                    scale=4, elem_id="follow-categories")
            follow_btn = gr.Button("Save", scale=1)
            refresh_btn = gr.Button("Refresh now", scale=1, elem_id="refresh-now")
        refresh_status = gr.Markdown(elem_id="refresh-status")

    def refresh_line(user_id: str, cats: list[str]) -> str:
        last = ctx.copilot.last_refresh(user_id)
        head = f"Following: {', '.join(cats) if cats else 'nothing yet'}."
        if not last:
            return head + " Not refreshed yet."
        return head + f" Last refresh {last.finished_at}: {plural(last.n_added, 'paper')} added."

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
            text += "\n\n" + "\n".join(f"- {without_paths(str(e))}" for e in result.errors)
        return text, paper_rows(ctx.copilot.papers(user_id))

    @act
    def refresh_state(user_id: str) -> tuple[str, str]:
        """The categories you follow and when the library was last refreshed."""
        cats = ctx.copilot.followed(user_id)
        return ", ".join(cats), refresh_line(user_id, cats)

    follow_btn.click(follow, [categories], [refresh_status], api_name="follow_categories")
    refresh_evt = refresh_btn.click(refresh_now, None, [refresh_status, papers], api_name="refresh_now")
    return {"changed": [refresh_evt], "load": [(refresh_state, [], [categories, refresh_status])]}
