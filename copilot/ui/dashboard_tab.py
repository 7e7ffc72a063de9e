"""Dashboard tab: how the thought memory grows, how deep and sure it is, whether it gets better, and each
thought with its provenance."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from copilot.engine import FEEDBACK_SIGNAL
from copilot.storage import utc_now
from copilot.ui.actions import action
from copilot.ui.context import AppContext

THOUGHT_HEADERS = ["id", "depth", "confidence", "support", "public", "flagged", "created", "text"]
THOUGHT_WIDTHS = ["56px", "64px", "100px", "80px", "72px", "80px", "170px", "auto"]
SORTS = {"newest": ("id", False), "oldest": ("id", True), "confidence": ("confidence", False),
         "depth": ("depth", False), "support": ("support", False)}
CONF_BINS = [i / 10 for i in range(11)]
EMPTY_HINT = ("**No thoughts yet.** Ask a question in the Chat tab: each answer leaves a thought in this memory, "
              "and the charts appear here as it grows.")
# Dates and times on the growth chart's axis, over at least ten minutes: Vega's default labels the span of seconds
# between a first thought and opening the dashboard in milliseconds (".800"), and any format repeats one label.
TIME_AXIS_FORMAT = "%b %d, %H:%M"
MIN_TIME_SPAN = pd.Timedelta(minutes=10)
# Vega's "category10" colours: a line keeps its colour (depth 1 is always blue) as the memory grows.
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
           "#bab0ac"]


def depth_colors(labels: list[str]) -> dict[str, str]:
    """``depth N`` keeps one colour for good (depth 1 is always blue).

    Gradio's line plot fixes its colour domain when it first draws and rebuilds the chart only when a property
    such as ``color_map`` changes; a map of exactly the lines present makes a new depth appear when it is born.
    """
    return {label: PALETTE[(int(label.split()[-1]) - 1) % len(PALETTE)] for label in labels}


def signal_colors(labels: list[str]) -> dict[str, str]:
    """Feedback in the first colour, each evaluation signal in the next ones (see ``depth_colors``)."""
    evals = sorted(label for label in set(labels) if label != FEEDBACK_SIGNAL)
    colours = {label: PALETTE[1 + i % (len(PALETTE) - 1)] for i, label in enumerate(evals)}
    return ({FEEDBACK_SIGNAL: PALETTE[0]} if FEEDBACK_SIGNAL in labels else {}) | colours


def line_labels(plot_value: Any, column: str) -> list[str]:  # noqa: ANN401 - a frame or Gradio's PlotData
    """The line labels in a plot's value: a frame, or the ``columns``/``data`` payload (a dict from the
    browser, a ``PlotData`` from ``postprocess``)."""
    if isinstance(plot_value, pd.DataFrame):
        return sorted(plot_value[column].unique()) if column in plot_value else []
    payload = plot_value if isinstance(plot_value, dict) else getattr(plot_value, "__dict__", {})
    columns = list(payload.get("columns") or [])
    if column not in columns:
        return []
    at = columns.index(column)
    return sorted({row[at] for row in payload.get("data") or []})


def charts_shown(growth: Any, evolution: Any) -> bool:  # noqa: ANN401 - frames or Gradio's PlotData
    """Whether there is anything to chart: a thought (the growth chart has a line) or a self-evolution point.
    Until then the dashboard shows its one-line hint instead of four empty charts."""
    return bool(line_labels(growth, "depth") or line_labels(evolution, "signal"))


def growth_frame(thoughts: list[dict[str, Any]], now: str | None = None) -> pd.DataFrame:
    """Cumulative number of thoughts over time, one line per depth.

    Every line starts at 0 when the first thought was made and runs on to ``now``, so even a single thought
    draws a line (a lone point would be invisible) and a deeper level visibly appears later than the first. The
    chart covers at least ``MIN_TIME_SPAN``: when the first thought is more recent, the lines start at 0 that much
    before ``now`` (the memory was empty then), so the axis is labelled in minutes, not milliseconds.
    """
    columns = ["time", "thoughts", "depth"]
    if not thoughts:
        return pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns, UTC]"),
                             "thoughts": pd.Series([], dtype=int), "depth": pd.Series([], dtype=str)})
    ordered = sorted(thoughts, key=lambda r: (r["created_at"] or "", r["id"]))
    start = pd.Timestamp(ordered[0]["created_at"])
    labels = sorted({f"depth {t['depth']}" for t in ordered}, key=lambda d: int(d.split()[1]))
    end = max(pd.Timestamp(now or utc_now()), pd.Timestamp(ordered[-1]["created_at"]))
    origin = min(start, end - MIN_TIME_SPAN)
    rows = [{"time": origin, "thoughts": 0, "depth": d} for d in labels if origin < start]
    rows += [{"time": start, "thoughts": 0, "depth": d} for d in labels]
    counts = dict.fromkeys(labels, 0)
    for t in ordered:
        depth = f"depth {t['depth']}"
        counts[depth] += 1
        rows.append({"time": pd.Timestamp(t["created_at"]), "thoughts": counts[depth], "depth": depth})
    rows += [{"time": end, "thoughts": counts[d], "depth": d} for d in labels]
    return pd.DataFrame(rows, columns=columns)


def depth_frame(thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    """Thoughts per abstraction depth, every level from 1 to the deepest shown (empty levels as 0)."""
    deepest = max((int(t["depth"]) for t in thoughts), default=0)
    counts = [sum(int(t["depth"]) == d for t in thoughts) for d in range(1, deepest + 1)]
    # Typed columns even when empty: the plot must know "depth" is a category before the first thought.
    return pd.DataFrame({"depth": pd.Series([f"depth {d}" for d in range(1, deepest + 1)], dtype=str),
                         "thoughts": pd.Series(counts, dtype=int)})


def confidence_frame(thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    """Thoughts per confidence band of width 0.1."""
    labels = [f"{a:.1f}-{b:.1f}" for a, b in zip(CONF_BINS, CONF_BINS[1:])]
    values = [float(t["confidence"] or 0.0) for t in thoughts]
    bands = pd.cut(pd.Series(values, dtype=float), CONF_BINS, labels=labels, include_lowest=True)
    counts = bands.value_counts().reindex(labels, fill_value=0)
    return pd.DataFrame({"confidence": labels, "thoughts": counts.values.astype(int)})


def evolution_frame(points: list[dict[str, Any]]) -> pd.DataFrame:
    """The self-evolution curve (:meth:`copilot.engine.Copilot.self_evolution`) as the plot's frame."""
    if not points:  # typed columns: an empty plot draws clean axes and knows its kinds of data
        return pd.DataFrame({"thoughts": pd.Series([], dtype=int), "quality": pd.Series([], dtype=float),
                             "signal": pd.Series([], dtype=str)})
    return pd.DataFrame(points, columns=["thoughts", "quality", "signal"])


def thought_rows(thoughts: list[dict[str, Any]], search: str = "", sort: str = "newest") -> list[list[Any]]:
    words = (search or "").lower().split()
    kept = [t for t in thoughts if all(w in (t["text"] or "").lower() for w in words)]
    key, ascending = SORTS.get(sort, SORTS["newest"])
    kept.sort(key=lambda t: (t[key] if t[key] is not None else -1), reverse=not ascending)
    return [[t["id"], t["depth"], round(float(t["confidence"] or 0.0), 3), t["support"], bool(t["public"]),
             bool(t["flagged"]), (t["created_at"] or "")[:19], t["text"]] for t in kept]


def summary_markdown(stats: dict[str, Any], feedback: list[dict[str, Any]]) -> str:
    if not stats["thoughts"] and not stats["queries"] and not feedback:
        return EMPTY_HINT
    by_depth = ", ".join(f"depth {d}: {n}" for d, n in sorted(stats["by_depth"].items())) or "none yet"
    ups = sum(f["value"] > 0 for f in feedback)
    return (f"**{stats['thoughts']} thoughts** ({by_depth}) · **{stats['queries']} questions** · "
            f"utilisation **{stats['utilisation']:.0%}** of retrieved items were thoughts · "
            f"feedback: {ups} helpful, {len(feedback) - ups} not helpful")


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
                                     y_lim=[0, None], x_axis_format=TIME_AXIS_FORMAT, elem_id="plot-growth")
                evolution = gr.LinePlot(x="thoughts", y="quality", color="signal", title="Self-evolution",
                                        x_title="thoughts in memory", y_title="quality", y_lim=[0, 1],
                                        caption="Running share of answers rated helpful, and stored evaluation "
                                                "runs' scores, against the number of thoughts. Rate answers in Chat "
                                                "or run python -m copilot.eval to fill it.", elem_id="plot-evolution")
            with gr.Row():
                depths = gr.BarPlot(x="depth", y="thoughts", title="Depth distribution", y_lim=[0, None],
                                    elem_id="plot-depth")
                confidences = gr.BarPlot(x="confidence", y="thoughts", title="Confidence distribution",
                                         y_lim=[0, None], elem_id="plot-confidence")
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
        return (summary_markdown(copilot.memory.stats(user_id), copilot.feedback_history(user_id)),
                growth_frame(thoughts), evolution_frame(copilot.self_evolution(user_id)), depth_frame(thoughts),
                confidence_frame(thoughts), thought_rows(thoughts, search, sort))

    def line_colours(growth: Any, evolution: Any) -> tuple[gr.LinePlot, gr.LinePlot, Any]:  # noqa: ANN401
        """After new data has arrived: colour maps for exactly the lines present, so the charts redraw them, and
        the charts shown once there is something to chart."""
        return (gr.LinePlot(color_map=depth_colors(line_labels(growth, "depth"))),
                gr.LinePlot(color_map=signal_colors(line_labels(evolution, "signal"))),
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
