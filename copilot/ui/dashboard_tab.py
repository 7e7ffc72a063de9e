"""Dashboard tab: how the thought memory grows, how deep and sure it is, whether it gets better, and each
thought with its provenance."""

from __future__ import annotations

import bisect
from typing import Any

import gradio as gr
import pandas as pd

from copilot.ui.context import AppContext, fail
from copilot.ui.services import Services

THOUGHT_HEADERS = ["id", "depth", "confidence", "support", "public", "flagged", "created", "text"]
SORTS = {"newest": ("id", False), "oldest": ("id", True), "confidence": ("confidence", False),
         "depth": ("depth", False), "support": ("support", False)}
CONF_BINS = [i / 10 for i in range(11)]


def growth_frame(thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    """Cumulative number of thoughts over time, one line per depth."""
    rows, counts = [], {}
    for t in sorted(thoughts, key=lambda r: (r["created_at"] or "", r["id"])):
        depth = f"depth {t['depth']}"
        counts[depth] = counts.get(depth, 0) + 1
        rows.append({"time": pd.Timestamp(t["created_at"]), "thoughts": counts[depth], "depth": depth})
    return pd.DataFrame(rows, columns=["time", "thoughts", "depth"])


def depth_frame(thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    depths = pd.Series([f"depth {t['depth']}" for t in thoughts], dtype="object")
    counts = depths.value_counts().sort_index()
    return pd.DataFrame({"depth": counts.index.astype(str), "thoughts": counts.values.astype(int)})


def confidence_frame(thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    """Thoughts per confidence band of width 0.1."""
    labels = [f"{a:.1f}-{b:.1f}" for a, b in zip(CONF_BINS, CONF_BINS[1:])]
    values = [float(t["confidence"] or 0.0) for t in thoughts]
    bands = pd.cut(pd.Series(values, dtype=float), CONF_BINS, labels=labels, include_lowest=True)
    counts = bands.value_counts().reindex(labels, fill_value=0)
    return pd.DataFrame({"confidence": labels, "thoughts": counts.values.astype(int)})


def evolution_frame(services: Services, user: str, thoughts: list[dict[str, Any]]) -> pd.DataFrame:
    """Quality against memory size: the running share of helpful answers (from feedback), and evaluation
    runs' scores at the number of thoughts they used, when such runs exist."""
    created = sorted(t["created_at"] or "" for t in thoughts)
    rows, ups = [], 0
    for i, f in enumerate(services.feedback_history(user), start=1):
        ups += f["value"] > 0
        n_thoughts = bisect.bisect_right(created, f["created_at"])
        rows.append({"thoughts": n_thoughts, "quality": round(ups / i, 3), "signal": "feedback: share helpful"})
    from copilot.eval import self_evolution_points

    for p in self_evolution_points(services.copilot.store):
        rows.append({"thoughts": int(p["n_thoughts"]), "quality": float(p["value"]), "signal": f"eval: {p['metric']}"})
    return pd.DataFrame(rows, columns=["thoughts", "quality", "signal"])


def thought_rows(thoughts: list[dict[str, Any]], search: str = "", sort: str = "newest") -> list[list[Any]]:
    words = (search or "").lower().split()
    kept = [t for t in thoughts if all(w in (t["text"] or "").lower() for w in words)]
    key, ascending = SORTS.get(sort, SORTS["newest"])
    kept.sort(key=lambda t: (t[key] if t[key] is not None else -1), reverse=not ascending)
    return [[t["id"], t["depth"], round(float(t["confidence"] or 0.0), 3), t["support"], bool(t["public"]),
             bool(t["flagged"]), (t["created_at"] or "")[:19], t["text"]] for t in kept]


def summary_markdown(stats: dict[str, Any], feedback: list[dict[str, Any]]) -> str:
    by_depth = ", ".join(f"depth {d}: {n}" for d, n in sorted(stats["by_depth"].items())) or "none yet"
    ups = sum(f["value"] > 0 for f in feedback)
    return (f"**{stats['thoughts']} thoughts** ({by_depth}) · **{stats['queries']} questions** · "
            f"utilisation **{stats['utilisation']:.0%}** of retrieved items were thoughts · "
            f"feedback {ups} 👍 / {len(feedback) - ups} 👎")


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


def build(ctx: AppContext) -> dict[str, Any]:
    services = ctx.services
    with gr.Tab("Dashboard", id="dashboard"):
        with gr.Row():
            summary = gr.Markdown(elem_id="dashboard-summary")
            refresh = gr.Button("Refresh", size="sm", scale=0, elem_id="dashboard-refresh")
        with gr.Row():
            growth = gr.LinePlot(x="time", y="thoughts", color="depth", title="Memory growth by depth",
                                 elem_id="plot-growth")
            evolution = gr.LinePlot(x="thoughts", y="quality", color="signal", title="Self-evolution",
                                    x_title="thoughts in memory", y_title="quality", elem_id="plot-evolution")
        with gr.Row():
            depths = gr.BarPlot(x="depth", y="thoughts", title="Depth distribution", elem_id="plot-depth")
            confidences = gr.BarPlot(x="confidence", y="thoughts", title="Confidence distribution",
                                     elem_id="plot-confidence")
        with gr.Row():
            search = gr.Textbox(label="Search thoughts", scale=3, elem_id="thought-search")
            sort = gr.Dropdown(list(SORTS), value="newest", label="Sort by", scale=1)
        table = gr.Dataframe(headers=THOUGHT_HEADERS, interactive=False, wrap=True, elem_id="thought-table")
        with gr.Row():
            thought_id = gr.Number(label="Thought id", precision=0, scale=3, elem_id="thought-id")
            show_btn = gr.Button("Show provenance", scale=1, elem_id="thought-show")
            delete_btn = gr.Button("Delete thought", variant="stop", scale=1, elem_id="thought-delete")
        detail = gr.Markdown(elem_id="thought-detail")

    def dashboard(search: str, sort: str, request: gr.Request, profile: gr.OAuthProfile | None = None
                  ) -> tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, list[list[Any]]]:
        """Your memory at a glance: summary, growth, self-evolution, depth and confidence, and the thoughts."""
        user = ctx.user(request, profile)
        thoughts = services.thoughts(user)
        stats = services.copilot.memory.stats(user)
        return (summary_markdown(stats, services.feedback_history(user)), growth_frame(thoughts),
                evolution_frame(services, user, thoughts), depth_frame(thoughts), confidence_frame(thoughts),
                thought_rows(thoughts, search, sort))

    def list_thoughts(search: str, sort: str, request: gr.Request, profile: gr.OAuthProfile | None = None
                      ) -> list[list[Any]]:
        """Your thoughts, filtered by words and sorted."""
        return thought_rows(services.thoughts(ctx.user(request, profile)), search, sort)

    def show(thought_id: float | None, request: gr.Request, profile: gr.OAuthProfile | None = None) -> str:
        """One thought with the chunks and thoughts it was built from."""
        if thought_id is None:
            raise gr.Error("Give a thought id (or click a row of the table).")
        try:
            return provenance_markdown(services.thought(int(thought_id), ctx.user(request, profile)))
        except ValueError as exc:
            raise fail(exc) from exc

    def pick(evt: gr.SelectData, rows: pd.DataFrame, request: gr.Request,
             profile: gr.OAuthProfile | None = None) -> tuple[int, str]:
        row_index = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
        picked = int(rows.iloc[row_index, 0])
        return picked, show(picked, request, profile)

    def delete(thought_id: float | None, search: str, sort: str, request: gr.Request,
               profile: gr.OAuthProfile | None = None) -> tuple[str, list[list[Any]]]:
        """Delete one of your thoughts (and the provenance pointing at it)."""
        user = ctx.user(request, profile)
        if thought_id is None:
            raise gr.Error("Give the id of the thought to delete.")
        if not services.delete_thought(int(thought_id), user):
            raise gr.Error(f"No thought #{int(thought_id)} of yours.")
        return f"Thought #{int(thought_id)} deleted.", thought_rows(services.thoughts(user), search, sort)

    outputs = [summary, growth, evolution, depths, confidences, table]
    refresh.click(dashboard, [search, sort], outputs, api_name="dashboard")
    search.submit(list_thoughts, [search, sort], [table], api_name="list_thoughts")
    sort.change(list_thoughts, [search, sort], [table], api_visibility="private")
    show_btn.click(show, [thought_id], [detail], api_name="thought_detail")
    thought_id.submit(show, [thought_id], [detail], api_visibility="private")
    table.select(pick, [table], [thought_id, detail], api_visibility="private")
    delete_btn.click(delete, [thought_id, search, sort], [detail, table], api_name="delete_thought")
    return {"load": [(dashboard, [search, sort], outputs)], "tab_outputs": outputs, "refresh": dashboard,
            "inputs": [search, sort]}
