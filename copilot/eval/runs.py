"""Evaluation runs in the app's database (``eval_runs``), so the dashboard can list them and plot the
self-evolution curve they measured. One row per task of a run; ``report`` holds that task's summary (no
per-answer records: those stay in the run folder's ``report.json``)."""

from __future__ import annotations

import json
from typing import Any

from copilot.storage import Store


def task_summary(task: dict[str, Any]) -> dict[str, Any]:
    """A task's report without its per-answer records."""
    summary = {k: v for k, v in task.items() if k != "records"}
    if summary.get("heldout"):
        summary["heldout"] = {k: v for k, v in summary["heldout"].items() if k != "records"}
    return summary


def record_run(store: Store, report: dict[str, Any], path: str) -> list[int]:
    """Store every task of ``report`` as one ``eval_runs`` row; returns the new ids."""
    ids = []
    methods = ",".join(report["config"]["methods"])
    with store.transaction() as conn:
        for name, task in report["tasks"].items():
            body = task_summary(task) | {"llm": report["llm"], "config": report["config"]}
            cursor = conn.execute(
                "INSERT INTO eval_runs (task, methods, started_at, finished_at, path, report) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [name, methods, report["started_at"], report["finished_at"], path, json.dumps(body)])
            ids.append(int(cursor.lastrowid))
    return ids


def _rows(store: Store, task: str | None) -> list[dict[str, Any]]:
    where, params = ("WHERE task = ?", [task]) if task else ("", [])
    return list(store.db.query(f"SELECT * FROM eval_runs {where} ORDER BY id", params))


def list_runs(store: Store, task: str | None = None) -> list[dict[str, Any]]:
    """Stored runs, oldest first: id, task, methods, times, folder, primary metric and each method's mean."""
    runs = []
    for row in _rows(store, task):
        report = json.loads(row["report"] or "{}")
        metric = report.get("primary_metric")
        scores = {name: (m.get("metrics", {}).get(metric) or {}).get("mean")
                  for name, m in (report.get("methods") or {}).items()}
        runs.append({"id": row["id"], "task": row["task"], "methods": (row["methods"] or "").split(","),
                     "started_at": row["started_at"], "finished_at": row["finished_at"], "path": row["path"],
                     "llm": report.get("llm"), "n_items": report.get("n_items"), "primary_metric": metric,
                     "scores": scores, "quick": (report.get("config") or {}).get("quick", False)})
    return runs


def self_evolution_points(store: Store, task: str | None = None) -> list[dict[str, Any]]:
    """Every measured point of every stored run's self-evolution curve, one row per metric.

    Rows: run_id, task, fraction (share of the warm-up asked, %), warmup_queries, n_thoughts, metric, value.
    """
    points = []
    for row in _rows(store, task):
        report = json.loads(row["report"] or "{}")
        for p in report.get("self_evolution") or []:
            for metric, summary in p.get("metrics", {}).items():
                if summary.get("mean") is None:
                    continue
                points.append({"run_id": row["id"], "task": row["task"], "fraction": p["fraction"],
                               "warmup_queries": p["warmup_queries"], "n_thoughts": p["n_thoughts"],
                               "metric": metric, "value": summary["mean"]})
    return points
