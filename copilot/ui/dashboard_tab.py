"""Dashboard tab: how the thought memory grows, how deep and sure it is, whether it gets better, and each
thought with its provenance."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.dashboard_charts import (
    TIME_AXIS_FORMAT, charts_shown, confidence_frame, count_limit, depth_colors, depth_frame, evolution_frame,
    growth_frame, line_labels, signal_colors,
)
from copilot.errors import plural

THOUGHT_HEADERS = ["id", "depth", "confidence", "support", "public", "flagged", "created", "text"]
THOUGHT_WIDTHS = ["56px", "64px", "100px", "80px", "72px", "80px", "170px", "auto"]
SORTS = {"newest": ("id", False), "oldest": ("id", True), "confidence": ("confidence", False),
         "depth": ("depth", False), "support": ("support", False)}
EMPTY_HINT = ("**No thoughts yet.** Ask a question in the Chat tab: each answer leaves a thought in this memory, "
              "and the charts appear here as it grows.")


def thought_rows(thoughts: list[dict[str, Any]], search: str = "", sort: str = "newest") -> list[list[Any]]:
    words = (search or "").lower().split()
    kept = [t for t in thoughts if all(w in (t["text"] or "").lower() for w in words)]
    key, ascending = SORTS.get(sort, SORTS["newest"])
    kept.sort(key=lambda t: (t[key] if t[key] is not None else -1), reverse=not ascending)
    return [[t["id"], t["depth"], round(float(t["confidence"] or 0.0), 2), t["support"], bool(t["public"]),
             bool(t["flagged"]), (t["created_at"] or "")[:19], t["text"]] for t in kept]


def summary_markdown(stats: dict[str, Any], feedback: list[dict[str, Any]]) -> str:
    if not stats["thoughts"] and not stats["queries"] and not feedback:
        return EMPTY_HINT
    by_depth = ", ".join(f"depth {d}: {n}" for d, n in sorted(stats["by_depth"].items())) or "none yet"
    ups = sum(f["value"] > 0 for f in feedback)
    return (f"**{plural(stats['thoughts'], 'thought')}** ({by_depth}) · **{plural(stats['queries'], 'question')}** "
            f"asked · **{stats['utilisation']:.0%}** of the sources retrieved were thoughts · "
            f"rated {ups} helpful, {len(feedback) - ups} not helpful")


def _snippet(text: str, limit: int = 240) -> str:
    """A source's text on one line (a chunk's line breaks would split the Markdown list)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " …"


def provenance_markdown(row: dict[str, Any]) -> str:
    lines = [f"### Thought #{row['id']} (depth {row['depth']}, confidence {float(row['confidence'] or 0):.2f}, "
             f"support {row['support']})", row["text"], "", "**Built from**"]
    for s in row["provenance"]:
        if s["kind"] == "thought":
            extra = f" (depth {s['depth']})" if "depth" in s else ""
            lines.append(f"- thought #{s['id']}{extra}: {_snippet(s['text'])}")
        else:
            title = s.get("title") or s.get("paper_id") or ""
            where = f"*{title}*, {s.get('section') or ''}, p. {s.get('page') or '?'}"
            link = f" [arXiv]({s['url']})" if s.get("url") else ""
            lines.append(f"- chunk #{s['id']} — {where}{link}: {_snippet(s['text'])}")
    if not row["provenance"]:
        lines.append("- (no recorded sources)")
    return "\n".join(lines)


def build(ctx: AppContext) -> None:
    act = action(ctx)
    with gr.Tab("Dashboard", id="dashboard") as tab:
        with gr.Row():
            summary = gr.Markdown(EMPTY_HINT, elem_id="dashboard-summary")
            refresh = gr.Button("Refresh", size="sm", scale=0, elem_id="dashboard-refresh")
        with gr.Column(visible=False, elem_id="dashboard-charts") as charts:
            with gr.Row():
                growth = gr.LinePlot(x="time", y="thoughts", color="depth", title="Memory growth by depth",
                                     y_lim=[0, 5], y_axis_format="d", x_axis_format=TIME_AXIS_FORMAT,
                                     y_title="thoughts", elem_id="plot-growth")
                evolution = gr.LinePlot(x="thoughts", y="quality", color="signal", title="Self-evolution",
                                        x_title="thoughts in memory", y_title="quality",
                                        y_lim=[0, 1], x_lim=[0, 5], x_axis_format="d", y_axis_format=".0%",
                                        caption="The share of answers rated helpful so far (and any evaluation's "
                                                "score), against the number of thoughts in memory. Rate answers in "
                                                "Chat (Helpful / Not helpful under the conversation) to draw it.",
                                        elem_id="plot-evolution")
            with gr.Row():
                depths = gr.BarPlot(x="depth", y="thoughts", title="Depth distribution", y_lim=[0, 5],
                                    y_axis_format="d", elem_id="plot-depth")
                confidences = gr.BarPlot(x="confidence", y="thoughts", title="Confidence distribution",
                                         y_lim=[0, 5], y_axis_format="d", elem_id="plot-confidence")
        with gr.Row():
            search = gr.Textbox(label="Search thoughts", scale=3, elem_id="thought-search")
            sort = gr.Dropdown(list(SORTS), value="newest", label="Sort by", scale=1)
        table = gr.Dataframe(headers=THOUGHT_HEADERS, interactive=False, wrap=True, column_widths=THOUGHT_WIDTHS,
                             elem_id="thought-table")
        with gr.Row():
            thought_id = gr.Number(label="Thought id", precision=0, scale=3, elem_id="thought-id")
            show_btn = gr.Button("Show provenance", scale=1, elem_id="thought-show")
            delete_btn = gr.Button("Delete thought", variant="stop", scale=1, elem_id="thought-delete")
        detail = gr.Markdown(elem_id="thought-detail")

    @act
    def dashboard(search: str, sort: str, user_id: str
                  ) -> tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, list[list[Any]]]:
        """Your memory at a glance: summary, growth, self-evolution, depth and confidence, and the thoughts."""
        copilot = ctx.copilot
        thoughts = copilot.thoughts(user_id)
        depth, confidence = depth_frame(thoughts), confidence_frame(thoughts)
        return (summary_markdown(copilot.memory.stats(user_id), copilot.feedback_history(user_id)),
                growth_frame(thoughts), evolution_frame(copilot.self_evolution(user_id)),
                gr.BarPlot(depth, y_lim=count_limit(depth, "thoughts")),
                gr.BarPlot(confidence, y_lim=count_limit(confidence, "thoughts")), thought_rows(thoughts, search, sort))

    def line_colours(growth: Any, evolution: Any) -> tuple[gr.LinePlot, gr.LinePlot, Any]:  # noqa: ANN401
        """After new data has arrived: colour maps for exactly the lines present, so the charts redraw them, whole
        numbers on the count axes, and the charts shown once there is something to chart."""
        return (gr.LinePlot(color_map=depth_colors(line_labels(growth, "depth")), y_lim=count_limit(growth, "thoughts")),
                gr.LinePlot(color_map=signal_colors(line_labels(evolution, "signal")),
                            x_lim=count_limit(evolution, "thoughts")),
                gr.Column(visible=charts_shown(growth, evolution)))

    @act
    def list_thoughts(search: str, sort: str, user_id: str) -> list[list[Any]]:
        """Your thoughts, filtered by words and sorted."""
        return thought_rows(ctx.copilot.thoughts(user_id), search, sort)

    def provenance(thought_id: float | None, user_id: str) -> str:
        if thought_id is None:
            raise gr.Error("Give a thought id (or click a row of the table).")
        return provenance_markdown(ctx.copilot.thought(int(thought_id), user_id))

    @act
    def show(thought_id: float | None, user_id: str) -> str:
        """One thought with the chunks and thoughts it was built from."""
        return provenance(thought_id, user_id)

    @act
    def pick(evt: gr.SelectData, rows: pd.DataFrame, user_id: str) -> tuple[int, str]:
        row_index = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
        picked = int(rows.iloc[row_index, 0])
        return picked, provenance(picked, user_id)

    @act
    def delete(thought_id: float | None, search: str, sort: str, user_id: str) -> tuple[str, list[list[Any]]]:
        """Delete one of your thoughts (and the provenance pointing at it)."""
        if thought_id is None:
            raise gr.Error("Give the id of the thought to delete.")
        ctx.copilot.delete_thought(int(thought_id), user_id)
        return f"Thought #{int(thought_id)} deleted.", thought_rows(ctx.copilot.thoughts(user_id), search, sort)

    outputs = [summary, growth, evolution, depths, confidences, table]
    for event in (refresh.click(dashboard, [search, sort], outputs, api_name="dashboard"),
                  tab.select(dashboard, [search, sort], outputs, api_visibility="private")):  # current when opened
        event.then(line_colours, [growth, evolution], [growth, evolution, charts], api_visibility="private")
    search.submit(list_thoughts, [search, sort], [table], api_name="list_thoughts")
    sort.change(list_thoughts, [search, sort], [table], api_visibility="private")
    show_btn.click(show, [thought_id], [detail], api_name="thought_detail")
    thought_id.submit(show, [thought_id], [detail], api_visibility="private")
    table.select(pick, [table], [thought_id, detail], api_visibility="private")
    delete_btn.click(delete, [thought_id, search, sort], [detail, table], api_name="delete_thought")
