"""Run the evaluation: every method on every item of a task, then self-evolution, held-out transfer and judging.

Per task: the corpus goes into a fresh store; each method prepares (indices, summary trees); the
Thought-Retriever warms up on simulated questions in steps (0, 25, 50, 100% by default) and is scored after
each step (the self-evolution curve; the last step is its main result); every other method is scored once;
then the held-out transfer (memory grown on half the items through their own questions, scored on the other
half, against a cold start) and the pairwise judge (each method against the Thought-Retriever, both orders).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.config import Settings
from copilot.embeddings import Embedder, get_embedder
from copilot.eval import metrics
from copilot.eval.corpus import Bench, Cost, Meter
from copilot.eval.judge import compare
from copilot.eval.methods import THOUGHT_RETRIEVER, Method, ThoughtRetriever, TreeMethod, make_methods
from copilot.eval.runs import PRIMARY
from copilot.eval.tasks import Item, Task, halves, load_task
from copilot.llm import ChatModel, get_llm
from copilot.storage import utc_now

RECALL_KS = (1, 5, 10)
QUICK_LIMITS = {"abstract-single": 2, "synthesis": 3, "claims": 8}
QUICK_BUDGET = 600
EVOLUTION = [0, 25, 50, 100]
QUICK_EVOLUTION = [0, 50, 100]
Log = Callable[[str], None]


@dataclass
class EvalConfig:
    """What to run; a knob left empty takes the settings' (or, with ``quick``, the quick) value.

    ``limits`` and ``budgets`` are per task: items to sample, and context tokens per answer (the same for
    every method of the task).
    """

    tasks: list[str]
    methods: list[str]
    data: dict[str, Path] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    budgets: dict[str, int] = field(default_factory=dict)
    seed: int = 0
    top_k: int | None = None
    answer_tokens: int | None = None
    warmup: dict[str, int] = field(default_factory=dict)  # simulated questions per scope (paper or pooled corpus)
    evolution: list[int] | None = None
    judge: bool = True
    heldout: bool = True
    quick: bool = False

    def resolved(self, settings: Settings) -> dict[str, Any]:
        """Every knob with its effective value, as written into the report."""
        quick = self.quick
        default_budget = QUICK_BUDGET if quick else settings.context_budget_tokens
        evolution = self.evolution or (QUICK_EVOLUTION if quick else EVOLUTION)
        return {
            "tasks": self.tasks, "methods": self.methods, "seed": self.seed, "quick": quick,
            "data": {t: str(p) for t, p in self.data.items()},
            "limits": {t: self.limits.get(t, QUICK_LIMITS[t] if quick else None) for t in self.tasks},
            "budget_tokens": {t: self.budgets.get(t, default_budget) for t in self.tasks},
            "top_k": self.top_k or settings.top_k,
            "answer_tokens": self.answer_tokens or (96 if quick else 200),
            "warmup_per_scope": {t: self.warmup.get(t, 2 if quick else 4) for t in self.tasks},
            "evolution": sorted(set(evolution) | {100}),
            "judge": self.judge, "heldout": self.heldout,
            "temperature": 0.0, "min_confidence": settings.min_confidence,
        }


def stderr_log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ----- scoring one answer ------------------------------------------------------------------------------------

def score(task: Task, item: Item, answer: str, verdict: str | None, ranking: list[str], method: str,
          encode_tokens: Callable) -> dict[str, float | None]:
    """The per-item metrics of one answer."""
    if task.kind == "claims":
        recalls: dict[str, float | None] = {
            f"recall@{k}": (None if method == "no-retrieval" else metrics.recall_at_k(ranking, item.gold, k))
            for k in RECALL_KS}
        return recalls | {"accuracy": float(verdict == item.label)}
    return metrics.rouge(answer, item.reference) | {
        "semantic_f1": metrics.semantic_f1(encode_tokens, answer, item.reference)}


def evaluate(bench: Bench, method: Method, item: Item, **kwargs: Any) -> dict[str, Any]:
    """Retrieve, answer and score one item; the cost is everything the method spent on it."""
    with Meter(bench.llm) as meter:
        retrieval = method.retrieve(item, **kwargs)
    answer = bench.answer(item, retrieval.items)
    cost = meter.cost
    cost += answer.cost
    return {
        "item": item.id, "method": method.name, "answer": answer.text, "verdict": answer.verdict,
        "reused_answer": answer.reused,
        "context_items": len(retrieval.items), "context_tokens": sum(i.n_tokens for i in retrieval.items),
        "thoughts_in_context": sum(i.kind == "thought" for i in retrieval.items),
        "latency_s": round(cost.seconds, 3), "llm_calls": cost.llm_calls, "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens, "ranking": retrieval.ranking[:20],
        "scores": score(bench.task, item, answer.text, answer.verdict, retrieval.ranking, method.name,
                        bench.embedder.encode_tokens),
    }


def aggregate(records: list[dict[str, Any]], seed: int) -> dict[str, dict]:
    """Each metric over items: mean and 95% bootstrap interval."""
    names = list(records[0]["scores"]) if records else []
    return {name: metrics.summarise([r["scores"][name] for r in records], seed=seed) for name in names}


def cost_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    n = max(1, len(records))
    return {"latency_s": round(sum(r["latency_s"] for r in records) / n, 2),
            "llm_calls": round(sum(r["llm_calls"] for r in records) / n, 2),
            "prompt_tokens": round(sum(r["prompt_tokens"] for r in records) / n, 1),
            "completion_tokens": round(sum(r["completion_tokens"] for r in records) / n, 1),
            "context_tokens": round(sum(r["context_tokens"] for r in records) / n, 1),
            "thoughts_in_context": round(sum(r["thoughts_in_context"] for r in records) / n, 2)}


# ----- one task -----------------------------------------------------------------------------------------------

def task_settings(base: Settings, work_dir: Path, knobs: dict[str, Any], task: str) -> Settings:
    """The product's settings with the task's budget, K, output cap and greedy decoding, in ``work_dir``."""
    if work_dir.exists():
        shutil.rmtree(work_dir)
    return base.model_copy(update={"data_dir": work_dir, "context_budget_tokens": knobs["budget_tokens"][task],
                                   "top_k": knobs["top_k"], "max_answer_tokens": knobs["answer_tokens"],
                                   "temperature": 0.0})


def run_thought_retriever(bench: Bench, tr: ThoughtRetriever, knobs: dict[str, Any], log: Log
                          ) -> tuple[dict[str, dict], list[dict], dict[str, dict] | None]:
    """Warm up step by step, scoring after each step; returns (final records, evolution points, cold records)."""
    items = bench.task.items
    plan = tr.plan_warmup(items, knobs["warmup_per_scope"][bench.task.name])
    log(f"  warm-up: {len(plan.questions)} simulated questions ({plan.cost.llm_calls} LLM calls to write them)")
    points, cold, records = [], None, {}
    asked = 0
    for fraction in knobs["evolution"]:
        target = round(len(plan.questions) * fraction / 100)
        outcomes = [tr.ask(q.text, q.scope) for q in plan.questions[asked:target]]
        asked = target
        records = {item.id: evaluate(bench, tr, item) for item in items}
        point = {"fraction": fraction, "warmup_queries": asked, "n_thoughts": tr.n_thoughts(),
                 "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))},
                 "metrics": aggregate(list(records.values()), bench.seed),
                 "thoughts_in_context": cost_summary(list(records.values()))["thoughts_in_context"]}
        points.append(point)
        if asked == 0:
            cold = records
        primary = point["metrics"].get(PRIMARY[bench.task.name], {}).get("mean")
        log(f"  {fraction}% of warm-up ({asked} questions, {point['n_thoughts']} thoughts): "
            f"{PRIMARY[bench.task.name]} {primary}")
    return records, points, cold


def run_heldout(bench: Bench, tr: ThoughtRetriever, cold: dict[str, dict] | None, log: Log) -> dict[str, Any]:
    """Grow a separate memory through the questions of one half; score the other half, warm and cold."""
    warm_items, test_items = halves(bench.task.items, bench.seed)
    user = "heldout"
    with Meter(bench.llm) as meter:
        outcomes = [tr.ask(item.query, item.scope, user_id=user) for item in warm_items]
    warm = [evaluate(bench, tr, item, user_id=user) for item in test_items]
    cold_records = [cold[i.id] if cold else evaluate(bench, tr, i, user_id="cold") for i in test_items]
    result = {"warm_items": [i.id for i in warm_items], "test_items": [i.id for i in test_items],
              "n_thoughts": tr.n_thoughts(user), "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))},
              "warmup_cost": meter.cost.as_dict(),
              "warm": aggregate(warm, bench.seed), "cold": aggregate(cold_records, bench.seed),
              "thoughts_in_context": cost_summary(warm)["thoughts_in_context"],
              "records": warm}
    primary = PRIMARY[bench.task.name]
    log(f"  held-out: {primary} warm {result['warm'].get(primary, {}).get('mean')} vs cold "
        f"{result['cold'].get(primary, {}).get('mean')} ({result['n_thoughts']} thoughts from {len(warm_items)} items)")
    return result


def judge_all(bench: Bench, records: dict[str, dict[str, dict]], log: Log) -> dict[str, dict]:
    """Each method's win rate against the Thought-Retriever, per item and overall."""
    reference = records[THOUGHT_RETRIEVER]
    out = {}
    seen: dict[tuple[str, str, str], float] = {}  # methods with the same answer share one judgement
    with Meter(bench.llm) as meter:
        for name, per_item in records.items():
            if name == THOUGHT_RETRIEVER:
                continue
            item_scores = []
            for item in bench.task.items:
                pair = (item.id, per_item[item.id]["answer"], reference[item.id]["answer"])
                if pair not in seen:
                    seen[pair] = compare(bench.llm, item.query, item.reference, pair[1], pair[2])
                s = seen[pair]
                per_item[item.id]["win_vs_thought_retriever"] = s
                item_scores.append(s)
            tally = metrics.win_rate(item_scores)
            mean, low, high = metrics.bootstrap_ci(item_scores, seed=bench.seed)
            out[name] = {"rate": round(tally.rate, 4), "lo": round(low, 4), "hi": round(high, 4),
                         "wins": tally.wins, "ties": tally.ties, "losses": tally.losses}
    log(f"  judge: {meter.cost.llm_calls} calls in {meter.cost.seconds:.0f} s")
    return out


def run_task(task: Task, knobs: dict[str, Any], settings: Settings, embedder: Embedder, llm: ChatModel,
             log: Log = stderr_log) -> dict[str, Any]:
    """Everything measured on one task, as it goes into the report."""
    started = time.perf_counter()
    bench = Bench(task, settings, embedder, llm, seed=knobs["seed"])
    log(f"{task.name}: {len(task.items)} items, {len(task.docs)} passages in {len(task.groups)} documents")
    methods = make_methods(bench, knobs["methods"])
    records: dict[str, dict[str, dict]] = {}
    evolution: list[dict] = []
    heldout = None
    try:
        for name, method in methods.items():
            with Meter(llm) as meter:
                method.prepare(task.items)
            method.build += meter.cost
            log(f"  {name}: prepared in {meter.cost.seconds:.1f} s ({meter.cost.llm_calls} LLM calls)")
        tr = methods.get(THOUGHT_RETRIEVER)
        cold = None
        if isinstance(tr, ThoughtRetriever):
            records[THOUGHT_RETRIEVER], evolution, cold = run_thought_retriever(bench, tr, knobs, log)
        for name, method in methods.items():
            if name == THOUGHT_RETRIEVER:
                continue
            records[name] = {item.id: evaluate(bench, method, item) for item in task.items}
            summary = aggregate(list(records[name].values()), bench.seed)
            log(f"  {name}: {PRIMARY[task.name]} {summary.get(PRIMARY[task.name], {}).get('mean')}")
        if isinstance(tr, ThoughtRetriever) and knobs["heldout"] and len(task.items) >= 2:
            heldout = run_heldout(bench, tr, cold, log)
        wins = judge_all(bench, records, log) if (
            knobs["judge"] and task.kind == "generate" and THOUGHT_RETRIEVER in records and len(records) > 1) else {}
        result = {
            "task": task.name, "kind": task.kind, "source": task.source, "selection": task.selection,
            "n_items": len(task.items), "n_passages": len(task.docs), "n_documents": len(task.groups),
            "primary_metric": PRIMARY[task.name],
            "methods": {name: method_summary(method, list(records[name].values()), wins.get(name), bench.seed)
                        for name, method in methods.items()},
            "self_evolution": evolution, "heldout": heldout,
            "records": {name: list(per_item.values()) for name, per_item in records.items()},
            "wall_s": round(time.perf_counter() - started, 1),
        }
        if task.kind == "claims":
            labels = [i.label for i in task.items]
            result["majority_accuracy"] = round(max(labels.count(v) for v in set(labels)) / len(labels), 4)
        return result
    finally:
        bench.close()


def method_summary(method: Method, records: list[dict], win: dict | None, seed: int) -> dict[str, Any]:
    build: Cost = method.trees.cost if isinstance(method, TreeMethod) else method.build
    return {"metrics": aggregate(records, seed), "cost": cost_summary(records), "build": build.as_dict(),
            "memory": method.memory(), "win_rate_vs_thought_retriever": win}


# ----- a whole run --------------------------------------------------------------------------------------------

def run_evaluation(config: EvalConfig, out: Path, settings: Settings, *, llm: ChatModel | None = None,
                   embedder: Embedder | None = None, log: Log = stderr_log, command: str = "") -> dict[str, Any]:
    """Run every task of ``config``; returns the report (also written to ``out``)."""
    # The report draws its plots with matplotlib: loaded for a run, not for the dashboard, which reads PRIMARY here.
    from copilot.eval.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    knobs = config.resolved(settings) | {"command": command}
    embedder = embedder or get_embedder(settings)
    llm = llm or get_llm(settings)
    report: dict[str, Any] = {"config": knobs, "llm": llm.describe(), "embedder": embedder.name,
                              "started_at": utc_now(), "tasks": {}}
    started = time.perf_counter()
    for name in config.tasks:
        task = load_task(name, config.data.get(name), limit=knobs["limits"][name], seed=config.seed)
        task_knobs = knobs | {"methods": config.methods}
        report["tasks"][name] = run_task(task, task_knobs, task_settings(settings, out / "work" / name, knobs, name),
                                         embedder, llm, log)
    report["finished_at"] = utc_now()
    report["wall_s"] = round(time.perf_counter() - started, 1)
    write_report(report, out)
    log(f"report written to {out} in {report['wall_s']:.0f} s")
    return report
