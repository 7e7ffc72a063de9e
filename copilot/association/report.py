"""The figures that justify shipping the adapter, measured on data it never trained on.

1. Held-out persons: a trigger must bring back its statement, searched among that person's ten statements
   and, harder, among every held-out statement of every held-out person; plain cosine against the combined
   score, with the exact McNemar test on per-query hits.
2. Ordinary look-up must not get worse: LoCoMo questions against their conversation's turns, evidence
   Recall@k, plain against combined.
3. Read-time cost: one query's encoding with and without the adapter applied, and no LLM involved.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from copilot.association.adapter import QueryAdapter
from copilot.association.data import Life, locomo_benchmark, lives_benchmark, write_benchmark
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import (
    ADAPTER_ONLY,
    ASSOCIATION,
    UNTRAINED,
    EvalResult,
    evaluate,
    format_table,
)
from copilot.association.scoring import AssociativeScorer

SCORERS = (UNTRAINED, "adapter only", ASSOCIATION)


def _scorers(adapter: QueryAdapter) -> dict[str, float]:
    return {UNTRAINED: 0.0, "adapter only": ADAPTER_ONLY, ASSOCIATION: adapter.weight}


def held_out_lives(adapter: QueryAdapter, lives: Sequence[Life]) -> list[Life]:
    """The lives of the persons the adapter's file names as validation persons."""
    names = set(adapter.config.get("val_persons", []))
    if not names:
        raise ValueError("The adapter file names no validation persons; pass lives explicitly.")
    return [life for life in lives if life.person in names]


def lives_results(adapter: QueryAdapter, lives: Sequence[Life], cache: EmbeddingCache) -> dict[str, EvalResult]:
    """Triggers and direct questions, per-person pool and pooled over all given persons."""
    results = {}
    for pooled in (False, True):
        memories, queries = lives_benchmark(lives, pooled=pooled, kinds=("trigger", "direct"))
        result = evaluate(memories, queries, cache, adapter, _scorers(adapter))
        pool = "all held-out statements" if pooled else "own 10 statements"
        results[f"triggers, {pool}"] = result.subset("trigger")
        results[f"direct questions, {pool}"] = result.subset("direct")
    return results


def locomo_result(adapter: QueryAdapter, cache: EmbeddingCache, path: Path) -> EvalResult:
    memories, queries = locomo_benchmark(path)
    return evaluate(memories, queries, cache, adapter, _scorers(adapter))


def read_time_cost(scorer: AssociativeScorer, texts: Sequence[str], repeats: int = 1) -> dict:
    """Median milliseconds to encode one query, plain and with the adapter applied as the engine applies it
    (:meth:`AssociativeScorer.query_vectors` on the plain vector), interleaved.

    Alternating the two per query spreads any background load evenly over both.
    """
    embedder = scorer.embedder
    plain_ms: list[float] = []
    adapted_ms: list[float] = []
    adapter_us: list[float] = []
    embedder.encode_queries(texts[:2])  # warm-up
    for _ in range(repeats):
        for i, text in enumerate(texts):
            for adapted in ((False, True) if i % 2 else (True, False)):
                start = time.perf_counter()
                vector = embedder.encode_queries([text])
                if adapted:
                    scorer.query_vectors(vector)
                (adapted_ms if adapted else plain_ms).append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            scorer.query_vectors(vector)
            adapter_us.append(1e6 * (time.perf_counter() - start))
    plain, adapted = statistics.median(plain_ms), statistics.median(adapted_ms)
    return {"n_queries": len(texts) * repeats, "plain_ms_median": round(plain, 2),
            "with_adapter_ms_median": round(adapted, 2), "ratio": round(adapted / plain, 3),
            "adapter_alone_us_median": round(statistics.median(adapter_us), 1),
            "llm_modules_loaded": any(name == "copilot.llm" or name.startswith("copilot.llm.")
                                      for name in sys.modules)}


def _json_block(result: EvalResult) -> dict:
    summary = result.summary(SCORERS)
    summary["mrr"] = {s: round(result.mrr(s), 4) for s in SCORERS}
    summary["gain"] = {f"recall@{k}": round(result.percent(ASSOCIATION, k) - result.percent(UNTRAINED, k), 2)
                       for k in result.ks}
    summary["mcnemar"] = {f"recall@{k}": asdict(result.significance(k)) for k in result.ks}
    return summary


def build_report(adapter: QueryAdapter, lives: Sequence[Life], cache: EmbeddingCache, locomo: Path | None,
                 scorer: AssociativeScorer | None, timing_queries: int = 100, eval_dir: Path | None = None
                 ) -> tuple[str, dict]:
    """Markdown and JSON of every figure; ``eval_dir`` also receives the benchmarks as eval-command files."""
    held = held_out_lives(adapter, lives)
    sections = [f"Adapter: {adapter.kind}, {adapter.n_parameters:,} parameters, w = {adapter.weight}; "
                f"held-out persons: {len({life.person for life in held})}, statements: {len(held)}."]
    data: dict = {"adapter": {"kind": adapter.kind, "weight": adapter.weight, "parameters": adapter.n_parameters},
                  "held_out": {}}
    for title, result in lives_results(adapter, held, cache).items():
        sections.append(format_table(result, SCORERS, f"Held-out {title}"))
        data["held_out"][title] = _json_block(result)
    if locomo is not None and locomo.exists():
        result = locomo_result(adapter, cache, locomo)
        sections.append(format_table(result, SCORERS, "LoCoMo evidence recall (questions → own conversation)"))
        data["locomo"] = _json_block(result)
        if scorer is not None:
            texts = [q.text for q in result.queries[:timing_queries]]
            cost = read_time_cost(scorer, texts)
            data["read_time"] = cost
            sections.append("**Read-time cost** (one query, median of {n_queries}): plain {plain_ms_median} ms, "
                            "with adapter {with_adapter_ms_median} ms, ratio {ratio}; the adapter alone "
                            "{adapter_alone_us_median} µs; LLM modules loaded: {llm_modules_loaded}."
                            .format(**cost))
    if eval_dir is not None:
        _write_eval_files(held, locomo, eval_dir)
    return "\n\n".join(sections), data


def _write_eval_files(held: Sequence[Life], locomo: Path | None, eval_dir: Path) -> None:
    for pooled, name in ((False, "lives_per_person"), (True, "lives_pooled")):
        memories, queries = lives_benchmark(held, pooled=pooled)
        write_benchmark(memories, queries, eval_dir / f"{name}_memories.jsonl", eval_dir / f"{name}_queries.jsonl")
    if locomo is not None and locomo.exists():
        memories, queries = locomo_benchmark(locomo)
        write_benchmark(memories, queries, eval_dir / "locomo_memories.jsonl", eval_dir / "locomo_queries.jsonl")
