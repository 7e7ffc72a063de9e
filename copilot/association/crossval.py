"""The two adapter kinds compared by cross-validation over persons: every person is held out exactly once.

The persons are dealt into ``folds`` groups (:func:`~copilot.association.training.person_folds`). For each group,
the residual MLP (the shipped recipe, w 1) and the query-side LoRA (the shipped recipe,
:class:`~copilot.association.lora_training.LoraTrainConfig`) are trained on the other persons and scored on it
as ``report`` scores the shipped adapters: every statement of the group in one pool, searched by each trigger
and direct question, first alone and then among distractor lines. The per-query hits are pooled over the
folds, so each statement of the data counts once, and the exact McNemar test compares the pooled hits.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from copilot.association.data import Life, persons_of
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import UNTRAINED, evaluate
from copilot.association.heldout import DISTRACTORS_PER_PERSON, benchmarks
from copilot.association.metrics import mcnemar_exact

MLP, LORA = "residual MLP", "LoRA"
KINDS = (UNTRAINED, MLP, LORA)


def _fold_hits(held: Sequence[Life], adapters: dict[str, Any], cache: EmbeddingCache, distractors: Sequence[str],
               per_person: int) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """pool → measure (trigger Recall@10, direct Recall@1) → kind → per-query hits, for one fold."""
    out: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for pool, (memories, queries) in benchmarks(held, distractors, per_person).items():
        results = {name: evaluate(memories, queries, cache, adapter, {UNTRAINED: 0.0, name: adapter.weight})
                   for name, adapter in adapters.items()}
        first = next(iter(results.values()))
        out[pool] = {}
        for measure, kind, k in (("trigger_recall@10", "trigger", 10), ("direct_recall@1", "direct", 1)):
            parts = {name: result.subset(kind) for name, result in results.items()}
            out[pool][measure] = {UNTRAINED: first.subset(kind).recall[UNTRAINED][k]} | {
                name: part.recall[name][k] for name, part in parts.items()}
    return out


def _summary(hits: dict[str, np.ndarray]) -> dict[str, Any]:
    row: dict[str, Any] = {"n_queries": int(len(hits[UNTRAINED]))}
    row |= {name: round(100 * float(values.mean()), 2) for name, values in hits.items()}
    for before, after in ((UNTRAINED, MLP), (UNTRAINED, LORA), (MLP, LORA)):
        test = mcnemar_exact(hits[before], hits[after])
        row[f"{after} vs {before}"] = asdict(test) | {
            "gain": round(100 * float(hits[after].mean() - hits[before].mean()), 2)}
    return row


def cross_validate(lives: Sequence[Life], cache: EmbeddingCache, model_path: str | Path, distractors: Sequence[str],
                   evaluation_texts: Sequence[str] = (), folds: int = 3, seed: int = 0,
                   per_person: int = DISTRACTORS_PER_PERSON, progress: Callable[[str], None] = lambda _: None,
                   mlp_config: Any = None, lora_config: Any = None) -> dict[str, Any]:
    """Pooled held-out recall of plain cosine, the residual MLP and the LoRA over ``folds`` person folds
    (``mlp_config``/``lora_config``: the recipes; the shipped ones when None)."""
    from copilot.association.lora import load_lora
    from copilot.association.lora_training import LoraTrainConfig, save_run, train_lora
    from copilot.association.training import TrainConfig, person_folds, train

    if not 2 <= folds <= len(persons_of(lives)):
        raise ValueError(f"Cannot make {folds} folds of {len(persons_of(lives))} persons.")
    pooled: dict[str, dict[str, dict[str, list[np.ndarray]]]] = {}
    per_fold: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="association-cv-") as tmp:
        for number, test in enumerate(person_folds(persons_of(lives), folds, seed), start=1):
            held = [life for life in lives if life.person in set(test)]
            started = time.perf_counter()
            mlp = train(lives, test, cache, mlp_config or TrainConfig(kind="residual_mlp", fixed_weight=1.0,
                                                                      seed=seed), evaluation_texts).adapter
            mlp_s = time.perf_counter() - started
            recipe = lora_config or LoraTrainConfig(seed=seed, distractors_per_person=per_person)
            run = train_lora(lives, test, cache, recipe, model_path, distractors, evaluation_texts)
            lora = load_lora(save_run(run, Path(tmp) / f"fold{number}"), model_path)
            lora_s = time.perf_counter() - started - mlp_s
            fold = _fold_hits(held, {MLP: mlp, LORA: lora}, cache, distractors, per_person)
            row = {"fold": number, "persons": len(test), "statements": len(held), "mlp_fit_s": round(mlp_s, 1),
                   "lora_fit_s": round(lora_s, 1), "lora_best_step": run.info["best_step"]}
            for pool, measures in fold.items():
                row[pool] = {name: round(100 * float(v.mean()), 2) for name, v in measures["trigger_recall@10"].items()}
                for measure, hits in measures.items():
                    for name, values in hits.items():
                        pooled.setdefault(pool, {}).setdefault(measure, {}).setdefault(name, []).append(values)
            per_fold.append(row)
            progress(f"fold {number}/{folds}: {row}")
    return {"folds": folds, "seed": seed, "persons": len(persons_of(lives)), "statements": len(lives),
            "distractors_per_person": per_person, "per_fold": per_fold,
            "pooled": {pool: {measure: _summary({name: np.concatenate(parts) for name, parts in hits.items()})
                              for measure, hits in measures.items()} for pool, measures in pooled.items()}}


def markdown(result: dict[str, Any]) -> str:
    """The pooled table: trigger Recall@10 and direct Recall@1 per pool, with gains and exact McNemar p."""
    lines = [f"{result['folds']}-fold cross-validation over {result['persons']} persons ({result['statements']} "
             f"statements, each held out once; seed {result['seed']}).", "",
             "| pool | measure | queries | plain | residual MLP | LoRA | MLP gain (p) | LoRA gain (p) "
             "| LoRA vs MLP (p) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for pool, measures in result["pooled"].items():
        label = "alone" if pool == "alone" else f"{result['distractors_per_person']} distractors / person"
        for measure, row in measures.items():
            tests = [row[f"{MLP} vs {UNTRAINED}"], row[f"{LORA} vs {UNTRAINED}"], row[f"{LORA} vs {MLP}"]]
            cells = " | ".join(f"{t['gain']:+.1f} ({t['p_value']:.2g})" for t in tests)
            lines.append(f"| {label} | {measure} | {row['n_queries']} | {row[UNTRAINED]:.1f} | {row[MLP]:.1f} | "
                         f"{row[LORA]:.1f} | {cells} |")
    return "\n".join(lines)
