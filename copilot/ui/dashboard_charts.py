"""The dashboard's charts as frames: memory growth by depth, self-evolution, depth and confidence distributions,
with the colours and axis limits that keep them readable as the memory grows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from copilot.engine import FEEDBACK_SIGNAL
from copilot.storage import utc_now

CONF_BINS = [i / 10 for i in range(11)]
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


def _column(plot_value: Any, column: str) -> list[Any]:  # noqa: ANN401 - a frame or Gradio's PlotData
    """The values of ``column`` in a plot's value: a frame, or the ``columns``/``data`` payload (a dict from the
    browser, a ``PlotData`` from ``postprocess``)."""
    if isinstance(plot_value, pd.DataFrame):
        return plot_value[column].tolist() if column in plot_value else []
    payload = plot_value if isinstance(plot_value, dict) else getattr(plot_value, "__dict__", {})
    columns = list(payload.get("columns") or [])
    if column not in columns:
        return []
    at = columns.index(column)
    return [row[at] for row in payload.get("data") or []]


def line_labels(plot_value: Any, column: str) -> list[str]:  # noqa: ANN401 - a frame or Gradio's PlotData
    """The line labels in a plot's value (see :func:`_column`)."""
    return sorted(set(_column(plot_value, column)))


def count_limit(plot_value: Any, column: str) -> list[float]:  # noqa: ANN401 - a frame or Gradio's PlotData
    """A count axis from 0 to at least 5, so that its ticks are whole numbers (a memory of one thought would be
    drawn on ticks 0.2 apart)."""
    return [0, max(5, int(max((v for v in _column(plot_value, column) if v is not None), default=0)))]


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
