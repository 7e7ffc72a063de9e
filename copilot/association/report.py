"""The figures that justify shipping the adapter, measured on persons and conversations it never trained on.

1. Held-out persons (the adapter file names them): every held-out statement in one pool, searched by each
   trigger and each direct question, first alone and then hidden among distractor lines (a few hundred
   conversational lines per person, :mod:`copilot.association.heldout`); then where users live, two statements
   at a time hidden in a whole real conversation (``real_turns``); plain cosine, the association term alone, the
   combined score, and optionally a baseline adapter trained on the same split (the residual MLP), with the
   exact McNemar test on per-query hits and a per-relation table. A first table sets the pools side by side,
   and the real-turn Recall@10 is also given for a range of w, beside a query-blind control (what ranking each
   conversation's lines by how little they resemble the rest finds without reading the query); the same two
   real-conversation pools again with other persons' statements in each conversation, where that control fails.
2. Ordinary look-up must not get worse: LoCoMo questions against their conversation's turns, evidence
   Recall@k, plain against combined.
3. Read-time cost: one question's encoding, plain and with the adapter applied as the engine applies it, and
   no LLM involved.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from copilot.association.data import RELATIONS, Life, locomo_benchmark, lives_benchmark, write_benchmark
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import (ADAPTER_ONLY, ASSOCIATION, BY_SENTENCE, UNTRAINED, UNTRAINED_BY_SENTENCE,
                                            EvalResult, evaluate, format_table)
from copilot.association.heldout import (CUES_PER_CONVERSATION, DISTRACTORS_PER_PERSON, OTHER_STATEMENTS,
                                         benchmarks, relation_of_queries)
from copilot.association.metrics import mcnemar_exact
from copilot.association.scoring import AssociativeScorer, message_parts, sentence_query_vectors

ALONE = "association term alone"
BASELINE = "baseline"
SCORERS = (UNTRAINED, ALONE, ASSOCIATION, UNTRAINED_BY_SENTENCE, BY_SENTENCE)  # the last: the product's recall
POOLS = {"alone": "held-out statements alone", "distractors": "with distractor lines",
         "real_turns": "in real conversations", "real_turns_chat": "in real conversations, asked after a chat turn",
         "real_turns_matched": "in real conversations with other persons' statements",
         "real_turns_chat_matched": "the same, asked after a chat turn"}
WEIGHTS = (0.5, 1.0, 2.0, 3.0, 5.0)  # the w of the real-turn sweep


def held_out_persons(adapter: Any) -> list[str]:
    """The persons the adapter never trained on: ``test_persons`` (LoRA) or ``val_persons`` (``.npz``)."""
    names = adapter.config.get("test_persons") or adapter.config.get("val_persons") or []
    if not names:
        raise ValueError("The adapter file names no held-out persons; pass lives explicitly.")
    return sorted(names)


def held_out_lives(adapter: Any, lives: Sequence[Life]) -> list[Life]:
    names = set(held_out_persons(adapter))
    return [life for life in lives if life.person in names]


class Remembering:
    """An adapter whose E_θ(q) of each text is computed once per report: the held-out queries are scored in
    two pools, and a LoRA pass over thousands of questions is the slow part on a CPU."""

    def __init__(self, adapter: Any) -> None:
        self.inner = adapter
        self.kind, self.weight, self.config = adapter.kind, adapter.weight, adapter.config
        self.dimension, self.n_parameters = adapter.dimension, adapter.n_parameters
        self._seen: dict[str, np.ndarray] = {}

    def adapt(self, plain: np.ndarray, texts: Sequence[str] | None) -> np.ndarray:
        if texts is None:
            return self.inner.adapt(plain, None)
        missing = [i for i, t in enumerate(texts) if t not in self._seen]
        if missing:
            fresh = self.inner.adapt(plain[missing], [texts[i] for i in missing])
            self._seen.update({texts[i]: v for i, v in zip(missing, fresh, strict=True)})
        return np.stack([self._seen[t] for t in texts])


def scored(memories: list, queries: list, cache: EmbeddingCache, adapter: Any, baseline: Any | None) -> EvalResult:
    """Plain, association term alone and combined under ``adapter``, the plain and combined scores again with each
    query read sentence by sentence (as the product reads a message); the baseline's combined score beside."""
    result = evaluate(memories, queries, cache, adapter,
                      {UNTRAINED: 0.0, ALONE: ADAPTER_ONLY, ASSOCIATION: adapter.weight, UNTRAINED_BY_SENTENCE: 0.0,
                       BY_SENTENCE: adapter.weight}, by_sentence=(UNTRAINED_BY_SENTENCE, BY_SENTENCE))
    if baseline is not None:
        other = evaluate(memories, queries, cache, baseline, {BASELINE: baseline.weight})
        result.recall.update(other.recall)
        result.rank.update(other.rank)
    return result


def both_sides(lives: Sequence[Life], cache: EmbeddingCache, adapter: Any, k: int = 10) -> dict:
    """The ablation "query side against both sides", at evaluation only: the same adapter also reads the
    memories, cos(E(q), E(m)) + w·cos(E_θ(q), E_θ(m)), on the pooled held-out statements (triggers)."""
    memories, queries = lives_benchmark(lives, pooled=True)
    texts = [m.text for m in memories]
    plain_m, plain_q = cache.encode(texts), cache.encode([q.text for q in queries])
    adapted_q = adapter.adapt(plain_q, [q.text for q in queries])
    adapted_m = adapter.adapt(plain_m, texts)
    gold = np.array([[m.id for m in memories].index(q.gold[0]) for q in queries])

    def hits(scores: np.ndarray) -> np.ndarray:
        return (np.argsort(-scores, axis=1, kind="stable")[:, :k] == gold[:, None]).any(1).astype(float)

    plain = hits(plain_q @ plain_m.T)
    query_side = hits(plain_q @ plain_m.T + adapter.weight * adapted_q @ plain_m.T)
    both = hits(plain_q @ plain_m.T + adapter.weight * adapted_q @ adapted_m.T)
    return {"n_queries": len(queries), f"plain_recall@{k}": round(100 * plain.mean(), 2),
            f"query_side_recall@{k}": round(100 * query_side.mean(), 2),
            f"both_sides_recall@{k}": round(100 * both.mean(), 2),
            "mcnemar_both_vs_query_side": asdict(mcnemar_exact(query_side, both))}


def weight_sweep(memories: list, queries: list, cache: EmbeddingCache, adapter: Any, weights: Sequence[float] = WEIGHTS,
                 k: int = 10, by_sentence: bool = False) -> dict[str, float]:
    """Trigger Recall@k (percent) of the combined score at each w, the adapter's own w included (``by_sentence``:
    each query read sentence by sentence)."""
    triggers = [q for q in queries if q.kind == "trigger"]
    chosen = sorted({*weights, adapter.weight})
    names = {f"{w:g}": w for w in chosen}
    result = evaluate(memories, triggers, cache, adapter, names, ks=(k,), by_sentence=names if by_sentence else ())
    return {name: result.percent(name, k) for name in result.recall}


def side_by_side(results: dict[str, EvalResult], scorers: Sequence[str]) -> tuple[str, dict]:
    """Trigger Recall@10 in every pool and direct-question Recall@1, one row per scorer."""
    pools = [p for p in POOLS if p in results]
    direct = [p for p in pools if results[p].subset("direct").n_queries]
    head = ("| scorer | " + " | ".join(f"triggers R@10, {POOLS[p]}" for p in pools)
            + " | " + " | ".join(f"direct R@1, {POOLS[p]}" for p in direct) + " |")
    lines = ["**Side by side** (Recall in percent)", "", head, "|---|" + "---|" * (len(pools) + len(direct))]
    table: dict = {}
    for scorer in scorers:
        row = {f"triggers_recall@10_{p}": results[p].subset("trigger").percent(scorer, 10) for p in pools}
        row |= {f"direct_recall@1_{p}": results[p].subset("direct").percent(scorer, 1) for p in direct}
        table[scorer] = row
        lines.append(f"| {scorer} | " + " | ".join(f"{v:.1f}" for v in row.values()) + " |")
    return "\n".join(lines), table


def query_blind(memories: Sequence, queries: Sequence, cache: EmbeddingCache, k: int = 10) -> float:
    """Trigger Recall@k (percent) of a ranking that never reads the query: each group's lines, least like the
    group's mean line first. Where it finds the cues, they stand out by their form (a simulated statement among
    real chat turns), and an adapter's gain there may be that form learned, not an association; this control
    says how much of a pool's figure needs no query at all."""
    vectors = cache.encode([m.text for m in memories])
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(memories):
        groups.setdefault(m.group, []).append(i)
    top: dict[str, set[str]] = {}
    for group, index in groups.items():
        lines = vectors[index]
        order = np.argsort(lines @ lines.mean(0), kind="stable")[:k]
        top[group] = {memories[index[j]].id for j in order}
    hits = [any(g in top.get(q.group, set()) for g in q.gold) for q in queries if q.kind == "trigger"]
    return round(100 * float(np.mean(hits)), 2) if hits else 0.0


def relation_table(result: EvalResult, relations: Sequence[str], scorers: Sequence[str], k: int = 10) -> dict:
    """Recall@k per relation and scorer (percent), with the query count."""
    rel = np.array(relations)
    out = {}
    for name in RELATIONS:
        keep = rel == name
        out[name] = {"n": int(keep.sum())} | {s: round(100 * float(result.recall[s][k][keep].mean()), 2)
                                              for s in scorers if keep.any()}
    return out


def read_time_cost(scorer: AssociativeScorer, texts: Sequence[str], repeats: int = 1,
                   messages: Sequence[str] = ()) -> dict:
    """Median milliseconds to encode one question, plain and with the adapter applied as the engine applies it
    (:meth:`AssociativeScorer.query_vectors`: the LoRA's second pass), interleaved so background load falls
    evenly on both; and, given ``messages`` of several sentences, to encode and adapt each one's parts as recall
    reads them (:func:`~copilot.association.scoring.message_parts`): its sentences encoded in one batch, then
    adapted one by one."""
    embedder = scorer.embedder
    plain_ms: list[float] = []
    adapted_ms: list[float] = []
    adapter_ms: list[float] = []
    scorer.query_vectors(embedder.encode_queries(texts[:2]), list(texts[:2]))  # warm-up, loads the adapter
    for _ in range(repeats):
        for i, text in enumerate(texts):
            for adapted in ((False, True) if i % 2 else (True, False)):
                start = time.perf_counter()
                vector = embedder.encode_queries([text])
                if adapted:
                    scorer.query_vectors(vector, [text])
                (adapted_ms if adapted else plain_ms).append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            scorer.query_vectors(vector, [text])
            adapter_ms.append(1000 * (time.perf_counter() - start))
    plain, adapted = statistics.median(plain_ms), statistics.median(adapted_ms)
    by_sentence: dict = {}
    if messages:
        whole_ms: list[float] = []
        parts_ms: list[float] = []
        counts: list[int] = []
        for text in messages:  # as the chat recalls (copilot.memories): the message, then its sentences
            start = time.perf_counter()
            scorer.query_vector(text, embedder.encode_query(text))
            middle = time.perf_counter()
            parts = message_parts(text)
            sentence_query_vectors(parts[1:], embedder.encode_queries, lambda v, t: scorer.query_vector(t, v))
            parts_ms.append(1000 * (time.perf_counter() - start))
            whole_ms.append(1000 * (middle - start))
            counts.append(len(parts))
        by_sentence = {"messages": len(messages), "parts_mean": round(statistics.mean(counts), 2),
                       "whole_message_ms_median": round(statistics.median(whole_ms), 2),
                       "by_sentence_ms_median": round(statistics.median(parts_ms), 2)}
    return {"n_queries": len(texts) * repeats, "plain_ms_median": round(plain, 2),
            "with_adapter_ms_median": round(adapted, 2), "extra_ms_median": round(adapted - plain, 2),
            "ratio": round(adapted / plain, 3), "adapter_alone_ms_median": round(statistics.median(adapter_ms), 2),
            "llm_modules_loaded": any(name == "copilot.llm" or name.startswith("copilot.llm.")
                                      for name in sys.modules)} | by_sentence


def _json_block(result: EvalResult, scorers: Sequence[str]) -> dict:
    summary = result.summary(scorers)
    summary["mrr"] = {s: round(result.mrr(s), 4) for s in scorers}
    summary["gain"] = {f"recall@{k}": round(result.percent(ASSOCIATION, k) - result.percent(UNTRAINED, k), 2)
                       for k in result.ks}
    summary["mcnemar"] = {f"recall@{k}": asdict(result.significance(k)) for k in result.ks}
    if BY_SENTENCE in scorers:
        summary["gain_by_sentence"] = {f"recall@{k}": round(result.percent(BY_SENTENCE, k)
                                                            - result.percent(UNTRAINED, k), 2) for k in result.ks}
        summary["mcnemar_by_sentence"] = {f"recall@{k}": asdict(result.significance(k, UNTRAINED, BY_SENTENCE))
                                          for k in result.ks}
        summary["mcnemar_by_sentence_vs_plain_by_sentence"] = {
            f"recall@{k}": asdict(result.significance(k, UNTRAINED_BY_SENTENCE, BY_SENTENCE)) for k in result.ks}
    if BASELINE in scorers:
        summary["mcnemar_vs_baseline"] = {f"recall@{k}": asdict(result.significance(k, BASELINE, ASSOCIATION))
                                          for k in result.ks}
    return summary


def _relation_markdown(table: dict, scorers: Sequence[str]) -> str:
    lines = ["| relation | triggers | " + " | ".join(scorers) + f" | {scorers[-1]} over plain |",
             "|---|---|" + "---|" * (len(scorers) + 1)]
    for name, row in table.items():
        cells = " | ".join(f"{row.get(s, 0.0):.1f}" for s in scorers)
        gain = row.get(scorers[-1], 0) - row.get(UNTRAINED, 0)
        lines.append(f"| {name} | {row['n']} | {cells} | {gain:+.1f} |")
    return "\n".join(lines)


def build_report(adapter: Any, lives: Sequence[Life], cache: EmbeddingCache, locomo: Path | None,
                 scorer: AssociativeScorer | None, timing_queries: int = 100, eval_dir: Path | None = None,
                 baseline: Any | None = None, distractors_per_person: int = DISTRACTORS_PER_PERSON,
                 with_both_sides: bool = False) -> tuple[str, dict]:
    """Markdown and JSON of every figure; ``eval_dir`` also receives the benchmarks as eval-command files."""
    held = held_out_lives(adapter, lives)
    adapter = Remembering(adapter)
    baseline = Remembering(baseline) if baseline is not None else None
    scorers = (*SCORERS[:2], *([BASELINE] if baseline is not None else []), *SCORERS[2:])
    head = (f"Adapter: {adapter.kind}, {adapter.n_parameters:,} parameters, w = {adapter.weight}; held-out "
            f"persons: {len({life.person for life in held})}, statements: {len(held)}")
    if baseline is not None:
        head += f"; baseline: {baseline.kind}, w = {baseline.weight}"
    sections = [head + "."]
    data: dict = {"adapter": {"kind": adapter.kind, "weight": adapter.weight, "parameters": adapter.n_parameters},
                  "held_out": {}}
    locomo_memories, locomo_queries = locomo_benchmark(locomo) if locomo is not None and locomo.exists() else ([], [])
    conversations = [[m.text for m in locomo_memories if m.group == group]
                     for group in dict.fromkeys(m.group for m in locomo_memories)]
    pools = benchmarks(held, [m.text for m in locomo_memories], distractors_per_person, conversations=conversations)
    results: dict[str, EvalResult] = {}
    for pool, (memories, queries) in pools.items():
        results[pool] = result = scored(memories, queries, cache, adapter, baseline)
        label = {"alone": "all held-out statements",
                 "distractors": f"all held-out statements, {distractors_per_person} distractor lines per person",
                 "real_turns": f"up to {CUES_PER_CONVERSATION} held-out statements of one person in each of "
                               f"{len({m.group for m in memories})} copies of {len(conversations)} real "
                               "conversations",
                 "real_turns_chat": "the same real conversations, each trigger or direct question asked after a real "
                                    "chat turn",
                 "real_turns_matched": f"the same real conversations, each also holding {OTHER_STATEMENTS} "
                                       "statements of other persons",
                 "real_turns_chat_matched": f"the same real conversations with {OTHER_STATEMENTS} statements of "
                                            "other persons, each trigger or direct question asked after a real "
                                            "chat turn"}[pool]
        block: dict = {}
        for kind, title in (("trigger", "triggers"), ("direct", "direct questions")):
            part = result.subset(kind)
            if not part.n_queries:
                continue
            sections.append(format_table(part, scorers, f"Held-out {title}, {label}"))
            block[title] = _json_block(part, scorers)
        triggers = result.subset("trigger")
        table = relation_table(triggers, relation_of_queries(held, triggers.queries), scorers)
        sections.append(f"**Trigger Recall@10 by relation, {label}**\n\n" + _relation_markdown(table, scorers))
        block["by_relation_recall@10"] = table
        if pool.startswith("real_turns"):
            block["query_blind_triggers_recall@10"] = blind = query_blind(memories, queries, cache)
            sections.append(f"**Query-blind control, {POOLS[pool]}**: ranking each conversation's lines by how little "
                            f"they resemble its average line, without reading the query, recalls {blind:.1f} % of the "
                            "triggers' statements in the top 10.")
            sweeps = {ASSOCIATION: weight_sweep(memories, queries, cache, adapter),
                      BY_SENTENCE: weight_sweep(memories, queries, cache, adapter, by_sentence=True)}
            if baseline is not None:
                sweeps[BASELINE] = weight_sweep(memories, queries, cache, baseline)
            block["triggers_recall@10_by_weight"] = sweeps
            sections.append(f"**Trigger Recall@10 {POOLS[pool]}, by w**\n\n"
                            + "\n".join(f"- {name} ({(baseline if name == BASELINE else adapter).kind}): "
                                        + ", ".join(f"w {w} {r:.1f}" for w, r in sweep.items())
                                        for name, sweep in sweeps.items()))
        data["held_out"][pool] = block
    summary_text, data["side_by_side"] = side_by_side(results, scorers)
    sections.insert(1, summary_text)
    if with_both_sides:
        data["both_sides"] = row = both_sides(held, cache, adapter)
        sections.append("**Query side against both sides** (triggers, held-out statements alone; evaluation "
                         "only): plain {plain_recall@10}, query side {query_side_recall@10}, both sides "
                         "{both_sides_recall@10} (Recall@10)".format(**row)
                         + f", McNemar p {row['mcnemar_both_vs_query_side']['p_value']:.2g}.")
    if locomo_queries:
        result = scored(locomo_memories, locomo_queries, cache, adapter, baseline)
        sections.append(format_table(result, scorers, "LoCoMo evidence recall (questions → own conversation)"))
        data["locomo"] = _json_block(result, scorers)
        if scorer is not None:
            chatty = [q.text for q in pools.get("real_turns_chat", ([], []))[1]][:timing_queries]
            cost = read_time_cost(scorer, [q.text for q in locomo_queries[:timing_queries]], messages=chatty)
            data["read_time"] = cost
            sections.append("**Read-time cost** (one question, median of {n_queries}): plain {plain_ms_median} ms, "
                            "with the adapter {with_adapter_ms_median} ms (+{extra_ms_median} ms, ×{ratio}); the "
                            "adapter's pass alone {adapter_alone_ms_median} ms; LLM modules loaded: "
                            "{llm_modules_loaded}.".format(**cost)
                            + (" A message asked after a chat turn (median of {messages}): read whole "
                               "{whole_message_ms_median} ms, whole and sentence by sentence ({parts_mean} parts on "
                               "average) {by_sentence_ms_median} ms.".format(**cost)
                               if "messages" in cost else ""))
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
