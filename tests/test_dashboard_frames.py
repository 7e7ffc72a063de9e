"""The dashboard's plot data: what each chart is drawn from, including the cases that used to draw nothing."""

import gradio as gr
import pandas as pd

from copilot.engine import FEEDBACK_SIGNAL
from copilot.ui.dashboard_charts import (
    confidence_frame,
    depth_colors,
    depth_frame,
    growth_frame,
    line_labels,
    signal_colors,
)
from copilot.ui.dashboard_tab import summary_markdown, thought_rows


def thought(tid: int, depth: int, created: str, confidence: float = 0.7, text: str = "x") -> dict:
    return {"id": tid, "depth": depth, "created_at": created, "confidence": confidence, "support": 1, "public": 0,
            "flagged": 0, "text": text}


def test_one_thought_draws_a_line_from_zero_to_now() -> None:
    frame = growth_frame([thought(1, 1, "2026-11-29T10:00:00+00:00")], now="2026-11-29T10:30:00+00:00")
    assert list(frame["thoughts"]) == [0, 1, 1]
    assert frame["time"].iloc[0] == frame["time"].iloc[1] < frame["time"].iloc[-1]


def test_growth_is_cumulative_per_depth_and_every_line_starts_at_the_first_thought() -> None:
    thoughts = [thought(1, 1, "2026-11-29T10:00:00+00:00"), thought(2, 1, "2026-11-29T10:05:00+00:00"),
                thought(3, 2, "2026-11-29T10:10:00+00:00")]
    frame = growth_frame(thoughts, now="2026-11-29T11:00:00+00:00")
    depth2 = frame[frame["depth"] == "depth 2"]
    assert list(depth2["thoughts"]) == [0, 1, 1]
    assert depth2["time"].iloc[0] == pd.Timestamp("2026-11-29T10:00:00+00:00")
    assert frame[frame["depth"] == "depth 1"]["thoughts"].max() == 2
    assert growth_frame([]).empty


def test_depth_levels_without_thoughts_show_as_zero() -> None:
    frame = depth_frame([thought(1, 1, "t"), thought(2, 3, "t"), thought(3, 3, "t")])
    assert list(frame["depth"]) == ["depth 1", "depth 2", "depth 3"]
    assert list(frame["thoughts"]) == [1, 0, 2]
    assert depth_frame([]).empty


def test_confidence_bands_and_table_and_summary() -> None:
    thoughts = [thought(1, 1, "2026-11-29T10:00:00+00:00", 0.05, "about graphs"),
                thought(2, 2, "2026-11-29T10:01:00+00:00", 0.95, "about SPECTER graphs")]
    bands = confidence_frame(thoughts)
    assert len(bands) == 10 and bands["thoughts"].iloc[0] == 1 and bands["thoughts"].iloc[-1] == 1
    assert [r[0] for r in thought_rows(thoughts, "specter", "newest")] == [2]
    assert [r[0] for r in thought_rows(thoughts, "", "oldest")] == [1, 2]
    stats = {"thoughts": 2, "by_depth": {1: 1, 2: 1}, "queries": 3, "utilisation": 0.25}
    summary = summary_markdown(stats, [{"value": 1}, {"value": -1}, {"value": 1}])
    assert "2 thoughts" in summary and "depth 2: 1" in summary and "25%" in summary
    assert "2 helpful, 1 not helpful" in summary


def test_line_colours_follow_the_lines_present_in_what_the_browser_sends_back() -> None:
    frame = growth_frame([thought(1, 1, "2026-11-29T10:00:00+00:00"), thought(2, 3, "2026-11-29T10:05:00+00:00")])
    payload = gr.LinePlot(x="time", y="thoughts", color="depth").postprocess(frame)
    assert line_labels(payload, "depth") == line_labels(frame, "depth") == ["depth 1", "depth 3"]
    assert line_labels(payload.model_dump(), "depth") == ["depth 1", "depth 3"]  # the browser sends a dict
    assert line_labels(None, "depth") == []
    colours = depth_colors(["depth 1", "depth 3"])
    assert set(colours) == {"depth 1", "depth 3"} and colours["depth 1"] == depth_colors(["depth 1"])["depth 1"]
    signals = signal_colors([FEEDBACK_SIGNAL, "eval run 2: claims accuracy", "eval run 1: synthesis rougeL"])
    assert len(set(signals.values())) == 3 and signals[FEEDBACK_SIGNAL] == depth_colors(["depth 1"])["depth 1"]
