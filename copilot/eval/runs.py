"""Evaluation runs in the app's database (``eval_runs``), so the dashboard can list them and plot the
self-evolution curve they measured. One row per task of a run; ``report`` holds that task's summary (no
per-answer records: those stay in the run folder's ``report.json``). ``self_evolution_curve`` is the curve the
dashboard plots: the user's running share of helpful answers beside each run's headline score."""

from __future__ import annotations

import bisect
from typing import Any

from copilot.storage import Store

PRIMARY = {"abstract-single": "rougeL", "synthesis": "rougeL", "claims": "accuracy"}  # each task's headline metric
FEEDBACK_SIGNAL = "feedback: share helpful"


def task_summary(task: dict[str, Any]) -> dict[str, Any]:
    """A task's report without its per-answer records."""
    summary = {k: v for k, v in task.items() if k != "records"}
    if summary.get("heldout"):
        summary["heldout"] = {k: v for k, v in summary["heldout"].items() if k != "records"}
    return summary


def record_run(store: Store, report: dict[str, Any], path: str) -> list[int]:
    """Store every task of ``report`` as one ``eval_runs`` row; returns the new ids."""
    ids = []
    with store.transaction():
        for name, task in report["tasks"].items():
            body = task_summary(task) | {"llm": report["llm"], "config": report["config"]}
            ids.append(store.eval_runs.add(task=name, methods=report["config"]["methods"],
                                           started_at=report["started_at"], finished_at=report["finished_at"],
                                           path=path, report=body))
    return ids


def list_runs(store: Store, task: str | None = None) -> list[dict[str, Any]]:
    """Stored runs, oldest first: id, task, methods, times, folder, primary metric and each method's mean."""
    runs = []
    for run in store.eval_runs.list(task):
        report = run.report
        metric = report.get("primary_metric")
        scores = {name: (m.get("metrics", {}).get(metric) or {}).get("mean")
                  for name, m in (report.get("methods") or {}).items()}
        runs.append({"id": run.id, "task": run.task, "methods": run.methods,
                     "started_at": run.started_at, "finished_at": run.finished_at, "path": run.path,
                     "llm": report.get("llm"), "n_items": report.get("n_items"), "primary_metric": metric,
                     "scores": scores, "quick": (report.get("config") or {}).get("quick", False)})
    return runs


def self_evolution_points(store: Store, task: str | None = None) -> list[dict[str, Any]]:
    """Every measured point of every stored run's self-evolution curve, one row per metric.

    Rows: run_id, task, fraction (share of the warm-up asked, %), warmup_queries, n_thoughts, metric, value.
    """
    points = []
    for run in store.eval_runs.list(task):
        for p in run.report.get("self_evolution") or []:
            for metric, summary in p.get("metrics", {}).items():
                if summary.get("mean") is None:
                    continue
                points.append({"run_id": run.id, "task": run.task, "fraction": p["fraction"],
                               "warmup_queries": p["warmup_queries"], "n_thoughts": p["n_thoughts"],
                               "metric": metric, "value": summary["mean"]})
    return points


def self_evolution_curve(store: Store, feedback: list[dict[str, Any]], thoughts_created: list[str | None]
                         ) -> list[dict[str, Any]]:
    """Quality against memory size, rows of thoughts, quality and signal: after each rating in ``feedback``
    (oldest first) the running share of helpful answers at the number of thoughts made by then
    (``thoughts_created``: when each thought was made), then every stored run's points of its task's headline
    metric, one curve per run."""
    created = sorted(t or "" for t in thoughts_created)
    rows, ups = [], 0
    for i, f in enumerate(feedback, start=1):
        ups += f["value"] > 0
        rows.append({"thoughts": bisect.bisect_right(created, f["created_at"]), "quality": round(ups / i, 3),
                     "signal": FEEDBACK_SIGNAL})
    for p in self_evolution_points(store):
        if p["metric"] == PRIMARY.get(p["task"]):
            rows.append({"thoughts": int(p["n_thoughts"]), "quality": float(p["value"]),
                         "signal": f"eval run {p['run_id']}: {p['task']} {p['metric']}"})
    return rows
