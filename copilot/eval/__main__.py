"""``python -m copilot.eval``: run the evaluation and write a run folder (report.json, report.md, plots)."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click

from copilot.cli import Command
from copilot.config import Settings, apply_offline_defaults
from copilot.eval.methods import METHODS, parse_methods
from copilot.eval.runner import EvalConfig, run_evaluation
from copilot.eval.runs import record_run
from copilot.eval.tasks import DEFAULT_DATA, TASKS
from copilot.storage import Store


def _tasks(spec: str) -> list[str]:
    if spec == "all":
        return list(TASKS)
    names = [t.strip() for t in spec.split(",") if t.strip()]
    unknown = [t for t in names if t not in TASKS]
    if unknown or not names:
        raise click.BadParameter(f"unknown task(s) {', '.join(unknown) or '(none)'}; choose from all, "
                                 f"{', '.join(TASKS)}", param_hint="--task")
    return names


def per_task(spec: str | None, tasks: list[str], option: str, minimum: int) -> dict[str, int]:
    """``N`` (every task) or ``task=N,task=N`` -> {task: N}."""
    if not spec:
        return {}
    values: dict[str, int] = {}
    try:
        for part in spec.split(","):
            name, sep, value = part.strip().rpartition("=")
            for task in ([name] if sep else tasks):
                if task not in TASKS:
                    raise click.BadParameter(f"unknown task {task!r}", param_hint=option)
                values[task] = int(value)
    except ValueError as exc:
        raise click.BadParameter(f"a number, or task=number pairs separated by commas; got {spec!r}",
                                 param_hint=option) from exc
    if any(v < minimum for v in values.values()):
        raise click.BadParameter(f"at least {minimum}", param_hint=option)
    return values


def _percentages(spec: str | None) -> list[int] | None:
    if spec is None:
        return None
    try:
        values = sorted({int(v) for v in spec.split(",") if v.strip()})
    except ValueError as exc:
        raise click.BadParameter("a comma list of percentages, e.g. 0,25,50,100", param_hint="--evolution") from exc
    if not values or any(not 0 <= v <= 100 for v in values):
        raise click.BadParameter("percentages between 0 and 100", param_hint="--evolution")
    return values


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
               help=f"""Measure Thought-Retriever against baselines on the same data with the same LLM.

Tasks: abstract-single (write each paper's abstract from its body; default data {DEFAULT_DATA['abstract-single']}),
synthesis (ScholarQA-Multi questions over their pooled cited snippets), claims (SciFact: Recall@k of the
gold abstract and true/false accuracy). Methods: {', '.join(METHODS)}.

Writes OUT/report.json, OUT/report.md and PNG plots, and records the run in the app database's eval_runs
table (unless --no-record). The LLM and embedder are the configured ones (COPILOT_* variables).""")
@click.option("--task", "task_spec", default="abstract-single", show_default=True,
              help="A task, a comma list, or 'all'.")
@click.option("--methods", "method_spec", default="all", show_default=True, help="'all' or a comma list.")
@click.option("--data", "data_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="Data for the (single) task: a folder of PDFs for abstract-single, a JSON or JSONL file of the "
                   "same format for synthesis and claims. Default: tests/data.")
@click.option("--limit", default=None,
              help="Items per task, a seeded random sample: N for every task, or e.g. synthesis=8,claims=24 "
                   "(default: all; --quick: 2 papers, 3 questions, 8 claims).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample, the splits and clustering.")
@click.option("--budget", default=None,
              help="Context tokens per answer, the same for every method of a task: N, or e.g. "
                   "claims=500,synthesis=1000 (default: COPILOT_CONTEXT_BUDGET_TOKENS; --quick: 600).")
@click.option("--top-k", type=click.IntRange(min=1), default=None, help="Items per context (default: COPILOT_TOP_K).")
@click.option("--answer-tokens", type=click.IntRange(min=8), default=None,
              help="Cap on a generated answer (default 200; --quick: 96).")
@click.option("--warmup", default=None,
              help="Simulated warm-up questions per scope (per paper for abstract-single, per pooled corpus "
                   "otherwise): N, or e.g. abstract-single=3,synthesis=8 (default 4; --quick: 2).")
@click.option("--evolution", default=None,
              help="Shares of the warm-up (%) after which the Thought-Retriever is scored; 100 is always added "
                   "(default 0,25,50,100; --quick: 0,50,100).")
@click.option("--no-judge", is_flag=True, help="Skip the LLM-judged win rate.")
@click.option("--no-heldout", is_flag=True, help="Skip the held-out transfer.")
@click.option("--quick", is_flag=True, help="A small subset with a small budget, for CI (minutes).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run folder (default: DATA_DIR/eval/<timestamp>).")
@click.option("--data-dir", default=None, help="App data directory whose eval_runs table records the run "
                                              "(default: COPILOT_DATA_DIR or ./data).")
@click.option("--no-record", is_flag=True, help="Do not record the run in the app database.")
def main(task_spec: str, method_spec: str, data_path: Path | None, limit: str | None, seed: int, budget: str | None,
         top_k: int | None, answer_tokens: int | None, warmup: str | None, evolution: str | None, no_judge: bool,
         no_heldout: bool, quick: bool, out: Path | None, data_dir: str | None, no_record: bool) -> None:
    tasks = _tasks(task_spec)
    try:
        methods = parse_methods(method_spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--methods") from exc
    if data_path is not None and len(tasks) != 1:
        raise click.BadParameter("give --data with a single --task", param_hint="--data")
    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    apply_offline_defaults(settings)
    out = out or settings.data_dir / "eval" / time.strftime("%Y%m%d-%H%M%S")
    config = EvalConfig(tasks=tasks, methods=methods, data={tasks[0]: data_path} if data_path else {},
                        limits=per_task(limit, tasks, "--limit", 1), budgets=per_task(budget, tasks, "--budget", 100),
                        warmup=per_task(warmup, tasks, "--warmup", 0), evolution=_percentages(evolution),
                        seed=seed, top_k=top_k, answer_tokens=answer_tokens, judge=not no_judge,
                        heldout=not no_heldout, quick=quick)
    report = run_evaluation(config, out, settings, command="python -m copilot.eval " + shlex.join(sys.argv[1:]))
    if not no_record:
        with Store.open(settings) as store:
            ids = record_run(store, report, str(out.resolve()))
        click.echo(f"recorded as eval run(s) {', '.join(map(str, ids))} in {settings.db_path}")
    click.echo(f"{out / 'report.md'}")


if __name__ == "__main__":
    main(prog_name="python -m copilot.eval")
