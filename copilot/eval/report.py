"""Writing a run folder: ``report.json`` (everything, per-answer records included), ``report.md`` (tables)
and PNG plots (each task's methods on its primary metric, and the self-evolution curve)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from copilot.errors import plural

METRIC_LABELS = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "semantic_f1": "semantic F1",
                 "recall@1": "Recall@1", "recall@5": "Recall@5", "recall@10": "Recall@10", "accuracy": "accuracy"}
GENERATE_METRICS = ("rouge1", "rouge2", "rougeL", "semantic_f1")
CLAIM_METRICS = ("recall@1", "recall@5", "recall@10", "accuracy")


def metric_names(task: dict[str, Any]) -> tuple[str, ...]:
    return CLAIM_METRICS if task["kind"] == "claims" else GENERATE_METRICS


def cell(summary: dict[str, Any] | None) -> str:
    """``mean [low, high]`` with three decimals, or a dash when the metric does not apply."""
    if not summary or summary.get("mean") is None:
        return "–"
    return f"{summary['mean']:.3f} [{summary['lo']:.2f}, {summary['hi']:.2f}]"


def win_cell(win: dict[str, Any] | None) -> str:
    if not win:
        return "–"
    return f"{win['rate']:.2f} ({win['wins']}/{win['ties']}/{win['losses']})"


def methods_table(task: dict[str, Any]) -> list[str]:
    names = metric_names(task)
    judged = task["kind"] == "generate" and any(m.get("win_rate_vs_thought_retriever")
                                                 for m in task["methods"].values())
    head = ["method", *(METRIC_LABELS[n] for n in names)]
    head += ["win rate vs TR (W/T/L)"] if judged else []
    head += ["s/query", "LLM calls/query", "tokens/query", "build: LLM calls, s", "memory items"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in task["methods"].items():
        cost, build, memory = m["cost"], m["build"], m["memory"]
        row = [name, *(cell(m["metrics"].get(n)) for n in names)]
        row += [win_cell(m.get("win_rate_vs_thought_retriever"))] if judged else []
        row += [f"{cost['latency_s']:.1f}", f"{cost['llm_calls']:g}",
                f"{cost['prompt_tokens'] + cost['completion_tokens']:.0f}",
                f"{build['llm_calls']}, {build['seconds']:.0f}", str(memory.get("items", 0))]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def evolution_table(task: dict[str, Any]) -> list[str]:
    names = metric_names(task)
    head = ["warm-up", "questions asked", "thoughts", *(METRIC_LABELS[n] for n in names), "thoughts in context"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in task["self_evolution"]:
        row = [f"{p['fraction']}%", str(p["warmup_queries"]), str(p["n_thoughts"]),
               *(cell(p["metrics"].get(n)) for n in names), f"{p['thoughts_in_context']:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def heldout_table(task: dict[str, Any]) -> list[str]:
    h = task["heldout"]
    names = metric_names(task)
    lines = ["| memory | " + " | ".join(METRIC_LABELS[n] for n in names) + " |", "|" + "---|" * (len(names) + 1)]
    lines.append("| cold start (no thoughts) | " + " | ".join(cell(h["cold"].get(n)) for n in names) + " |")
    lines.append(f"| warmed on the other half ({plural(h['n_thoughts'], 'thought')}) | "
                 + " | ".join(cell(h["warm"].get(n)) for n in names) + " |")
    return lines


def markdown(report: dict[str, Any]) -> str:
    c = report["config"]
    out = ["# Evaluation report", "",
           f"LLM `{report['llm']}`, embedder `{report['embedder']}`; started {report['started_at']}, "
           f"finished {report['finished_at']}, wall time {report['wall_s'] / 60:.1f} min.", "",
           f"Top-K {c['top_k']} and the task's context budget for every method, answers capped at "
           f"{c['answer_tokens']} tokens, greedy decoding; seed {c['seed']}{' (quick)' if c['quick'] else ''}."]
    if c.get("command"):
        out += ["", f"Command: `{c['command']}`"]
    out += ["", "Cells are the mean over items with a 95% bootstrap interval. Win rate: the LLM judge compares "
            "each method's answer with the Thought-Retriever's (TR) against the reference, in both orders; a split "
            "verdict is a tie (counted half). Build: LLM calls and seconds spent before the first question "
            "(warm-up, summary trees; the two tree methods share one tree)."]
    for name, task in report["tasks"].items():
        sel = task["selection"]
        out += ["", f"## {name}", "",
                f"{plural(task['n_items'], 'item')} (of {sel.get('of')}, seed {sel.get('seed')}), "
                f"{task['n_passages']} passages in {task['n_documents']} documents; source `{task['source']}`; "
                f"context budget {c['budget_tokens'][name]} tokens; warm-up {c['warmup_per_scope'][name]} simulated "
                f"questions per {'paper' if name == 'abstract-single' else 'corpus'}; task wall time "
                f"{task['wall_s'] / 60:.1f} min.",
                ""]
        if task["kind"] == "claims":
            out += [f"Labels {sel.get('labels')}; always answering the majority label scores "
                    f"{task['majority_accuracy']:.3f}.", ""]
        out += methods_table(task)
        out += ["", f"![methods]({name}_methods.png)"]
        if task["self_evolution"]:
            out += ["", "### Self-evolution", ""] + evolution_table(task) + ["", f"![evolution]({name}_evolution.png)"]
        if task.get("heldout"):
            h = task["heldout"]
            out += ["", "### Held-out transfer", "",
                    f"A separate memory grown through the questions of {plural(len(h['warm_items']), 'item')}, scored "
                    f"on the other {len(h['test_items'])}:", ""] + heldout_table(task)
    return "\n".join(out) + "\n"


def plot_methods(task: dict[str, Any], path: Path) -> None:
    metric = task["primary_metric"]
    names = [n for n, m in task["methods"].items() if (m["metrics"].get(metric) or {}).get("mean") is not None]
    means = [task["methods"][n]["metrics"][metric]["mean"] for n in names]
    errors = [[m - task["methods"][n]["metrics"][metric]["lo"] for n, m in zip(names, means, strict=True)],
              [task["methods"][n]["metrics"][metric]["hi"] - m for n, m in zip(names, means, strict=True)]]
    fig = Figure(figsize=(8, 3.6))
    ax = fig.subplots()
    colours = ["tab:orange" if n == "thought-retriever" else "tab:blue" for n in names]
    ax.bar(names, means, yerr=errors, color=colours, capsize=3)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.set_title(f"{task['task']}: {METRIC_LABELS.get(metric, metric)} (95% bootstrap CI)")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_evolution(task: dict[str, Any], path: Path) -> None:
    metric = task["primary_metric"]
    points = [p for p in task["self_evolution"] if p["metrics"].get(metric, {}).get("mean") is not None]
    if not points:
        return
    x = [p["warmup_queries"] for p in points]
    mean = [p["metrics"][metric]["mean"] for p in points]
    fig = Figure(figsize=(6, 3.6))
    ax = fig.subplots()
    ax.plot(x, mean, marker="o", color="tab:orange", label="Thought-Retriever")
    ax.fill_between(x, [p["metrics"][metric]["lo"] for p in points], [p["metrics"][metric]["hi"] for p in points],
                    color="tab:orange", alpha=0.2)
    for xi, yi, p in zip(x, mean, points, strict=True):
        ax.annotate(f"{p['n_thoughts']} th.", (xi, yi), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize=8)
    dense = (task["methods"].get("dense") or {}).get("metrics", {}).get(metric, {}).get("mean")
    if dense is not None:
        ax.axhline(dense, color="tab:blue", linestyle="--", label="dense")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("warm-up questions asked")
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.set_title(f"{task['task']}: self-evolution")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    for name, task in report["tasks"].items():
        plot_methods(task, out / f"{name}_methods.png")
        if task["self_evolution"]:
            plot_evolution(task, out / f"{name}_evolution.png")
