"""``python -m copilot.bench models``: every embedded model through the same product paths, and the default chosen.

Each model (:data:`copilot.llm.embedded.EMBEDDED_MODELS`) is measured in a fresh process of its own, so that its
resident memory is its own, on a copy of one library of the four shared papers:

- ``lookup_exact``: the share of lookup questions (``tests/data/lookup.jsonl``) whose answer, asked through
  :meth:`Copilot.ask` (hybrid retrieval, the product's answer prompt in the model's form), contains the gold fact
  (case-insensitive, whitespace normalised, as the lookup benchmark matches it);
- ``abstract_rouge_l``: the quick evaluation's abstract-single ROUGE-L (``python -m copilot.eval --quick``: 2 papers,
  a 600-token context, 96-token answers) with the product's retrieval (the ``hybrid`` method);
- ``verdict_auc``: the ROC AUC of the model's own "yes" probability after ``answered:`` in the one thought call,
  on ScholarQA-Multi answers paired with their own and another question (``copilot.tools.calibration``);
- ``ttft_p50_s``: the median time from asking a lookup question to the first word of its answer (retrieval
  included); ``tokens_per_s``: answer tokens over the time from the first word to the last; ``rss_mb``: the peak
  resident memory of the measuring process (engine, embedder and model).

The default is the model with the best answers (``lookup_exact``, then ``abstract_rouge_l``) among those whose first
word does not come later than :data:`FIRST_WORD_TARGET_S`, or than the shipped default's own where the machine is
slower than that. Another model replaces the shipped default only when its answers are better beyond chance: more
lookup facts right on the same questions with an exact McNemar p below :data:`SIGNIFICANCE` (8 questions of
``--quick`` cannot show that: 4 right against 1 is p 0.25). The chosen model's verdict scores also refit ``COPILOT_RELEVANCE_WEIGHT``: the share of the
answer's measured relevance in a thought's confidence that best separates real answers from mismatched ones.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr

from copilot.config import DATA_ROOT, Settings
from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS

JSON_KEYS = ("model", "default", "abstract_rouge_l", "lookup_exact", "verdict_auc", "ttft_p50_s", "tokens_per_s",
             "rss_mb")
# The many-users target for one user's first answer word on 2 idle cores: p50 at most 4 s (docs/models.md, "Many
# users on one machine", where SmolLM2 measured 1.46 s); a new default may not make a visitor wait longer than this.
FIRST_WORD_TARGET_S = 4.0
SIGNIFICANCE = 0.05  # a new default must get more lookup facts right than the shipped one beyond this chance
USER = "models"
PAPERS_DIR = DATA_ROOT / "papers"
WEIGHTS = [round(0.05 * i, 2) for i in range(21)]
Log = Callable[[str], None]


@dataclass(frozen=True)
class Size:
    """How much of each measurement one run takes (None: all of it)."""

    lookup: int | None
    pairs: int  # matched calibration pairs (as many mismatched ones)
    quick_eval: bool
    answer_tokens: int | None = None  # cap on a lookup answer (None: the product's); a fact comes first


FULL = Size(lookup=None, pairs=40, quick_eval=False)
QUICK = Size(lookup=8, pairs=8, quick_eval=True, answer_tokens=64)  # a few minutes a model on 2 cores


def spread(items: Sequence[Any], n: int | None) -> list[Any]:
    """``n`` items evenly spread over ``items`` (every paper of the lookup set gets its share); all for None."""
    if n is None or n >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / max(n - 1, 1))] for i in range(n)]


def build_library(data_dir: Path, log: Log) -> None:
    """The four shared papers, uploaded by the benchmark's user, in ``data_dir``."""
    from copilot.bench.lookup import load_questions
    from copilot.library import Library

    settings = Settings(data_dir=data_dir, llm_backend="local", database_url=SecretStr(""))
    library = Library.open(settings)
    try:
        for stem in sorted({q.paper for q in load_questions()}):
            result = library.add_pdf(PAPERS_DIR / f"{stem}.pdf", user_id=USER)
            log(f"added {stem}: {result.n_chunks} chunks")
    finally:
        library.store.close()


def lookup_answers(copilot: Any, size: Size, log: Log) -> dict[str, Any]:
    """Lookup questions through the product's ask: exact matches, first words, generation speed."""
    from copilot.bench.lookup import load_questions, normalise

    questions = spread(load_questions(), size.lookup)
    hits: list[bool] = []
    first_words, tokens, seconds = [], 0, 0.0
    for question in questions:
        result = copilot.ask(question.question, user_id=USER, write_thought=False)
        hit = normalise(question.gold) in normalise(result.answer)
        hits.append(hit)
        t = result.timings
        first_words.append(t["first_word_ms"] / 1000)
        generated = copilot.llm.count_tokens(result.answer)
        if generated > 1:  # the first token's time is the prompt's; the rest is generation
            tokens += generated - 1
            seconds += max((t["retrieve_ms"] + t["answer_ms"] - t["first_word_ms"]) / 1000, 1e-3)
        log(f"  {copilot.settings.llm_model} {question.id}: {'hit' if hit else 'miss'} "
            f"({t['first_word_ms'] / 1000:.2f} s to the first word)")
    return {"lookup_exact": round(sum(hits) / len(questions), 4), "lookup_hits": hits,
            "ttft_p50_s": round(statistics.median(first_words), 2),
            "tokens_per_s": round(tokens / seconds, 1) if seconds else None, "lookup_questions": len(questions)}


def best_relevance_weight(model: Sequence[float], relevance: Sequence[float], labels: Sequence[int],
                          threshold: float) -> tuple[float, float]:
    """(weight, AUC): the relevance share of the confidence with the best ROC AUC on these pairs, ties going to
    the better balanced accuracy at ``threshold`` (what keeps or drops a thought), then to the smaller weight."""
    from copilot.thoughts import combined_confidence
    from copilot.tools.calibration import rates, roc_auc

    def quality(weight: float) -> tuple[float, float, float]:
        combined = [combined_confidence(m, r, weight) for m, r in zip(model, relevance, strict=True)]
        tpr, fpr = rates(list(labels), combined, threshold)
        return round(roc_auc(list(labels), combined), 3), round((tpr + 1 - fpr) / 2, 3), -weight

    best = max(WEIGHTS, key=quality)
    return best, quality(best)[0]


def verdicts(copilot: Any, size: Size) -> dict[str, Any]:
    """The thought call's verdict AUC on calibration pairs, and the relevance weight it calls for."""
    from copilot.tools.calibration import (cross_validated_relevance, make_pairs, question_answer_cosines, report,
                                           score_pairs)

    pairs = make_pairs(n=size.pairs, seed=0)
    scores, _ = score_pairs(copilot.llm, pairs)
    cosines = question_answer_cosines(copilot.embedder, pairs)
    settings = copilot.settings
    measured = report(pairs, scores, cosines, settings.min_confidence, settings.relevance_weight)
    labels = np.array([p.label for p in pairs])
    relevance = cross_validated_relevance(np.asarray(cosines), labels)
    model = [0.0 if s is None else float(s) for s in scores]
    weight, combined_auc = best_relevance_weight(model, relevance.tolist(), labels.tolist(), settings.min_confidence)
    return {"verdict_auc": measured.model.auc, "relevance_weight": weight, "combined_auc": combined_auc,
            "relevance_auc": measured.relevance.auc, "unusable_verdicts": measured.unusable}


def abstract_rouge(settings: Settings, llm: Any, embedder: Any, size: Size, work: Path) -> float:
    """abstract-single's ROUGE-L with the product's retrieval, at the quick (or full) evaluation's sizes."""
    from copilot.eval.runner import EvalConfig, run_task, task_settings
    from copilot.eval.tasks import load_task

    config = EvalConfig(tasks=["abstract-single"], methods=["hybrid"], judge=False, heldout=False,
                        quick=size.quick_eval, warmup={"abstract-single": 0})
    knobs = config.resolved(settings)
    task = load_task("abstract-single", limit=knobs["limits"]["abstract-single"], seed=0)
    result = run_task(task, knobs, task_settings(settings, work, knobs, "abstract-single"), embedder, llm,
                      log=lambda message: None)
    return round(result["methods"]["hybrid"]["metrics"]["rougeL"]["mean"], 4)


def measure(name: str, library: Path, size: Size, log: Log) -> dict[str, Any]:
    """Every figure of model ``name``, in this process, on a copy of ``library``."""
    from copilot.engine import Copilot

    work = Path(tempfile.mkdtemp(prefix=f"models-{name}-"))
    try:
        shutil.copytree(library, work / "data")
        settings = Settings(data_dir=work / "data", llm_backend="local", llm_model=name,
                            database_url=SecretStr(""), **({"max_answer_tokens": size.answer_tokens}
                                                           if size.answer_tokens else {}))
        copilot = Copilot.open(settings)
        try:
            copilot.embedder.encode_query("warm-up")
            copilot.llm.chat([{"role": "user", "content": "Hello"}], max_tokens=1)  # loaded before the clock
            log(f"{name}: {copilot.llm.describe()}")
            row: dict[str, Any] = {"model": name, "default": name == DEFAULT_EMBEDDED_MODEL}
            started = time.perf_counter()
            row |= lookup_answers(copilot, size, log)
            log(f"{name}: lookup {row['lookup_exact']}, first word p50 {row['ttft_p50_s']} s, "
                f"{row['tokens_per_s']} tokens/s ({time.perf_counter() - started:.0f} s)")
            step = time.perf_counter()
            row["abstract_rouge_l"] = abstract_rouge(settings, copilot.llm, copilot.embedder, size, work / "eval")
            log(f"{name}: abstract-single ROUGE-L {row['abstract_rouge_l']} ({time.perf_counter() - step:.0f} s)")
            step = time.perf_counter()
            row |= verdicts(copilot, size)
            log(f"{name}: verdict AUC {row['verdict_auc']}, relevance weight {row['relevance_weight']} "
                f"(combined AUC {row['combined_auc']}; {time.perf_counter() - step:.0f} s)")
        finally:
            copilot.store.close()
        row["rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        row["wall_s"] = round(time.perf_counter() - started, 1)
        return row
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_child(name: str, library: Path, quick: bool) -> subprocess.Popen:
    """:func:`measure` in a fresh process (``bench models --one NAME``), its log passed through."""
    args = [sys.executable, "-m", "copilot.bench", "models", "--one", name, "--library", str(library)]
    return subprocess.Popen(args + (["--quick"] if quick else []), stdout=subprocess.PIPE, text=True)


def child_row(name: str, child: subprocess.Popen) -> dict[str, Any]:
    out, _ = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"measuring {name} failed (exit {child.returncode}); its log is above")
    return json.loads(out.strip().splitlines()[-1])


def mcnemar_p(first: Sequence[bool], second: Sequence[bool]) -> float:
    """The exact two-sided McNemar p of two models' hits on the same questions (a binomial test of the questions
    only one of them got right)."""
    from scipy.stats import binomtest

    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    n = only_first + only_second
    return 1.0 if n == 0 else float(binomtest(only_second, n, 0.5).pvalue)


def choose(rows: Sequence[dict[str, Any]], target_s: float = FIRST_WORD_TARGET_S,
           significance: float = SIGNIFICANCE) -> dict[str, Any]:
    """The model with the best answers (lookup exact-match, then ROUGE-L) whose first word comes within
    ``target_s``, or within the shipped default's own time where even that misses the target; another model than
    the shipped default only where it gets more lookup facts right beyond chance (:func:`mcnemar_p`)."""
    shipped = next((r for r in rows if r["default"]), None)
    limit = max(target_s, shipped["ttft_p50_s"] or target_s) if shipped else target_s
    eligible = [r for r in rows if r["ttft_p50_s"] is not None and r["ttft_p50_s"] <= limit] or list(rows)
    best = max(eligible, key=lambda r: (r["lookup_exact"], r["abstract_rouge_l"]))
    if shipped is None or best is shipped or "lookup_hits" not in best or "lookup_hits" not in shipped:
        return best
    better = best["lookup_exact"] > shipped["lookup_exact"]
    return best if better and mcnemar_p(shipped["lookup_hits"], best["lookup_hits"]) < significance else shipped


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    """Exactly the keys other tools read."""
    return {key: row[key] for key in JSON_KEYS}


def markdown(rows: Sequence[dict[str, Any]], chosen: dict[str, Any], target_s: float) -> str:
    lines = ["| model | shipped default | lookup exact-match | abstract-single ROUGE-L | verdict ROC AUC | "
             "first word p50 (s) | generation (tokens/s) | RSS (MB) |", "|" + "---|" * 8]
    lines += [f"| {r['model']} | {'yes' if r['default'] else 'no'} | {r['lookup_exact']:.3f} "
              f"({r['lookup_questions']} questions) | {r['abstract_rouge_l']:.3f} | {r['verdict_auc']:.3f} | "
              f"{r['ttft_p50_s']:.2f} | {r['tokens_per_s']} | {r['rss_mb']:.0f} |" for r in rows]
    shipped = next((r for r in rows if r["default"]), None)
    for row in rows:
        if shipped is not None and row is not shipped and "lookup_hits" in row and "lookup_hits" in shipped:
            lines += ["", f"Lookup facts right: {row['model']} {sum(row['lookup_hits'])}, {shipped['model']} "
                      f"{sum(shipped['lookup_hits'])} of {len(row['lookup_hits'])}; exact McNemar p "
                      f"{mcnemar_p(shipped['lookup_hits'], row['lookup_hits']):.3g}."]
    lines += ["", f"Chosen: **{chosen['model']}** (best answers with the first word within {target_s:.1f} s or the "
              f"shipped default's own; a new default only with more lookup facts right at McNemar p < "
              f"{SIGNIFICANCE}); its verdicts call for a relevance weight of {chosen['relevance_weight']} "
              f"(thought confidence ROC AUC {chosen['combined_auc']})."]
    return "\n".join(lines)


def run(quick: bool, log: Log, names: Sequence[str] = tuple(EMBEDDED_MODELS), together: bool = False
        ) -> list[dict[str, Any]]:
    """Every model in ``names``, each in its own process, on one library built here: one after another, or all at
    once (``together``: on a machine other jobs share, both then meet the same load)."""
    with tempfile.TemporaryDirectory(prefix="models-library-") as tmp:
        library = Path(tmp) / "data"
        build_library(library, log)
        if together:
            children = {name: start_child(name, library, quick) for name in names}
            return [child_row(name, child) for name, child in children.items()]
        return [child_row(name, start_child(name, library, quick)) for name in names]
