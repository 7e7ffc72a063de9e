"""``python -m copilot.bench``: the benchmarks of docs/benchmarks.md (``make bench-scale``, ``make bench-latency``,
``make bench-lookup``, ``make bench-models``, ``followups``)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import click
import numpy as np

from copilot.config import Settings, apply_offline_defaults

# Each command imports its benchmark's modules itself: ``probe`` measures the peak memory and cold start of a fresh
# process, which must hold what the app would load and nothing the other benchmarks need.

WARM_UP = 20  # questions asked before the measured ones


@click.group(help="Benchmarks: measure on this machine and print the figures.")
def bench() -> None:
    pass


@bench.command(help="Retrieval, writes, cold start and memory as the library grows (see copilot/bench/scale.py).")
@click.option("--sizes", default="10000,100000", show_default=True, help="Chunk counts, comma-separated.")
@click.option("--backend", type=click.Choice(["sqlite", "postgres"]), default="sqlite", show_default=True,
              help="Storage backend measured.")
@click.option("--database-url", default="", help="postgres: the PostgreSQL (with pgvector) to measure on; default "
              "COPILOT_DATABASE_URL, else a server of the pgserver package started for the run.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per size, one per line.")
@click.option("--queries", "n_queries", default=200, show_default=True, help="Real questions asked per size.")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None,
              help="Where the temporary libraries are built (default: the system's temporary folder).")
def scale(sizes: str, backend: str, database_url: str, as_json: bool, n_queries: int, work_dir: str | None) -> None:
    from copilot.bench import corpus
    from copilot.bench.scale import bench_server, markdown, run_size
    from copilot.embeddings import Embedder
    from copilot.storage import Store

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        counts = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"sizes must be whole numbers separated by commas, not {sizes!r}") from None
    if not counts or min(counts) < 2_000:
        raise click.BadParameter("each size must be at least 2000 chunks")
    settings = Settings()
    options = Store.index_options_from(settings)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    cache = settings.data_dir / "bench" / "scale"
    embedder = Embedder(settings.embedding_model, settings.embedding_batch_size)
    texts = corpus.real_texts()
    log(f"embedding {len(texts)} real texts (cached in {cache})")
    base = corpus.embedded(texts, cache / "texts.npz", embedder.encode_documents)
    questions = corpus.real_queries(limit=n_queries + WARM_UP)
    # Embedded as the chat embeds a question (the association adapter only changes the thought query).
    queries = corpus.embedded(questions, cache / "queries.npz", embedder.encode_queries)
    del embedder
    root = Path(work_dir) if work_dir else None
    if root:
        root.mkdir(parents=True, exist_ok=True)
    rows = []
    url = database_url or settings.database_url.get_secret_value()
    server = bench_server(root) if backend == "postgres" and not url else nullcontext(url)
    with server as url:
        for n in counts:
            row = run_size(n, base, texts, np.asarray(queries[WARM_UP:]), np.asarray(queries[:WARM_UP]), options,
                           root, log, database_url=url if backend == "postgres" else "")
            rows.append(row)
            if as_json:
                print(json.dumps(row), flush=True)
    if not as_json:
        print(markdown(rows))


@bench.command(help="Many chat users at once on the four shared papers (see copilot/bench/latency.py).")
@click.option("--users", default="1,5,10", show_default=True, help="Numbers of simultaneous users, comma-separated.")
@click.option("--questions", "n_questions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Questions each user asks, one after another.")
@click.option("--budget", type=click.IntRange(min=100), default=None,
              help="Context tokens per answer (default: COPILOT_CONTEXT_BUDGET_TOKENS).")
@click.option("--answer-tokens", type=click.IntRange(min=16), default=None,
              help="Cap on an answer (default: COPILOT_MAX_ANSWER_TOKENS).")
@click.option("--thought-wait", "thought_wait_s", type=float, default=600.0, show_default=True,
              help="Seconds to wait for the background thoughts after the last answer.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per number of users, one per line.")
def latency(users: str, n_questions: int, budget: int | None, answer_tokens: int | None, thought_wait_s: float,
            as_json: bool) -> None:
    from copilot.bench.latency import build_library, json_row, markdown, run_users, summary

    try:
        counts = [int(u) for u in users.split(",") if u.strip()]
    except ValueError:
        raise click.BadParameter(f"whole numbers separated by commas, not {users!r}", param_hint="--users") from None
    if not counts or min(counts) < 1:
        raise click.BadParameter("at least one user", param_hint="--users")
    settings = Settings()
    overrides = {k: v for k, v in (("context_budget_tokens", budget), ("max_answer_tokens", answer_tokens))
                 if v is not None}
    apply_offline_defaults(settings)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    rows = []
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        base = Path(tmp) / "library"
        build_library(settings.model_copy(update={"data_dir": base}), log)
        run_settings = settings.model_copy(update=overrides)
        log(f"budget {run_settings.context_budget_tokens} tokens, answers up to {run_settings.max_answer_tokens} "
            f"tokens, {run_settings.resolved_backend()} LLM")
        for n in counts:
            log(f"{n} user(s), {n_questions} question(s) each")
            row = summary(run_users(base, n, n_questions, run_settings, thought_wait_s, log))
            for message in row["error_messages"]:
                log(f"  error: {message}")
            rows.append(row)
            if as_json:
                print(json.dumps(json_row(row)), flush=True)
    if not as_json:
        print(markdown(rows))


@bench.command(help="Recall@8 and MRR of dense, lexical and hybrid retrieval on the lookup set (see "
               "copilot/bench/lookup.py).")
@click.option("--methods", default="dense,lexical,hybrid", show_default=True,
              help="Comma-separated, of dense, lexical, hybrid (fused as COPILOT_RETRIEVAL_FUSION says), "
              "hybrid-rrf, hybrid-weighted.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per method, one per line.")
def lookup(methods: str, as_json: bool) -> None:
    from copilot.bench.lookup import METHODS, markdown, run

    names = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown or not names:
        raise click.BadParameter(f"choose from {', '.join(METHODS)}", param_hint="--methods")
    settings = Settings()
    apply_offline_defaults(settings)
    rows, about = run(settings, names, log=lambda message: print(message, file=sys.stderr, flush=True))
    if as_json:
        for row in rows:
            print(json.dumps(row), flush=True)
    else:
        print(markdown(rows, about))


@bench.command(help="Question answering on the papers of tests/data/qa: right, shown with evidence, or declined (see "
               "copilot/bench/qa.py).")
@click.option("--model", "models_", default="", help="Embedded model names or GGUF paths, comma-separated "
              "(default: the embedded default).")
@click.option("--passes", type=click.IntRange(min=1, max=3), default=2, show_default=True,
              help="Times the questions are asked; each later pass uses the thoughts the earlier ones kept.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Ask only the first N questions.")
@click.option("--kinds", default="lookup,broad,unanswerable", show_default=True, help="Kinds of question asked.")
@click.option("--paper", "papers", multiple=True, help="Only the questions about this paper (a file stem); repeatable.")
@click.option("--details", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every question's answer and grade here, with its sources and, for an answer shown, each "
              "sentence's check (JSON lines).")
@click.option("--no-thoughts", is_flag=True, help="Answer from the papers alone: no thought is recalled or written "
              "(the baseline for whether the thought memory helps).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per model: the first pass's figures, the "
              "later passes under 'passes'.")
def qa(models_: str, passes: int, limit: int | None, kinds: str, papers: tuple[str, ...], details: Path | None,
       no_thoughts: bool, as_json: bool) -> None:
    from copilot.bench import qa as bench_qa
    from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    wanted = [k.strip() for k in kinds.split(",") if k.strip()]
    if not wanted or any(k not in bench_qa.KINDS for k in wanted):
        raise click.BadParameter(f"choose from {', '.join(bench_qa.KINDS)}", param_hint="--kinds")
    settings = Settings()
    apply_offline_defaults(settings)
    rows = []
    for model in [m.strip() for m in models_.split(",") if m.strip()] or [settings.llm_model or DEFAULT_EMBEDDED_MODEL]:
        target = details.with_name(f"{details.stem}.{Path(model).stem}{details.suffix}") if details and "," in models_ \
            else details
        found = bench_qa.bench(model, log, passes=passes, limit=limit, kinds=wanted, papers=papers, details=target,
                               thoughts=not no_thoughts)
        if as_json:
            print(json.dumps({k: found[0][k] for k in bench_qa.JSON_KEYS} | {"passes": found}), flush=True)
        rows += found
    if not as_json:
        print(bench_qa.markdown(rows))


@bench.command(help="Tables read cell by cell on the shared papers, and table facts answered through the chat (see "
               "copilot/bench/tables.py).")
@click.option("--model", default="", help="An embedded model's name or a GGUF path (default: the embedded default).")
@click.option("--no-answers", is_flag=True, help="Only detection and cell accuracy (no model).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Ask only the first N table questions.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def tables(model: str, no_answers: bool, limit: int | None, as_json: bool) -> None:
    from copilot.bench import tables as bench_tables

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    settings = Settings()
    apply_offline_defaults(settings)
    found = bench_tables.structure()
    log(f"{found['tables_detected']} tables read cell by cell of {found['tables_true']}; cell accuracy "
        f"{found['cell_accuracy']} on {found['truth_tables']} truth tables")
    from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL

    model = model or settings.llm_model or DEFAULT_EMBEDDED_MODEL
    asked = {"model": model} if no_answers else bench_tables.answers(model, log, settings, limit)
    result = {k: (found | asked).get(k) for k in bench_tables.JSON_KEYS}
    if as_json:
        print(json.dumps(result), flush=True)
        return
    for key, value in result.items():
        print(f"{key}: {value}")
    for table in found["per_table"]:
        print(f"  {table['paper']} table {table['table']}: {'found' if table['found'] else 'NOT FOUND'}, cells "
              f"{table['cells_right']}/{table['cells']}, header {table['header_right']}/{table['header']}")
    for row in asked.get("details", []):
        mark = "right" if row["right"] else "declined" if row["declined"] else "wrong"
        print(f"  {row['id']} {mark}: {row['answer'][:100]!r}")


@bench.command(help="A comparison table of the four shared papers against a hand-made truth (see "
               "copilot/bench/compare.py).")
@click.option("--model", default="", help="An embedded model's name or a GGUF path (default: the embedded default).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def compare(model: str, as_json: bool) -> None:
    from copilot.bench import compare as bench_compare

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    settings = Settings()
    apply_offline_defaults(settings)
    found = bench_compare.bench(model, log, settings)
    if as_json:
        print(json.dumps({k: found[k] for k in bench_compare.JSON_KEYS}), flush=True)
        return
    print(found["markdown"])
    for key in bench_compare.JSON_KEYS:
        print(f"{key}: {found[key]}")
    for row in found["details"]:
        print(f"  {'right' if row['right'] else 'WRONG'} {row['paper']} · {row['aspect']}: {row['cell'][:100]}")


@bench.command(help="Every embedded model through the same paths, and the default chosen (see "
               "copilot/bench/models.py).")
@click.option("--quick", is_flag=True, help="8 lookup questions with answers of up to 64 tokens, 8 calibration pairs, "
              "the quick evaluation's abstract-single (a few minutes a model on 2 cores).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per model, one per line.")
@click.option("--target", "target_s", type=float, default=None,
              help="Time to the first answer word a new default may not exceed (default: FIRST_WORD_TARGET_S).")
@click.option("--together", is_flag=True, help="Measure the models at the same time, each in its own process (on a "
              "machine other jobs share, so that both meet the same load; each is slower than alone).")
@click.option("--one", default=None, hidden=True, help="Measure this model in this process (the per-model half).")
@click.option("--library", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None, hidden=True)
def models(quick: bool, as_json: bool, target_s: float | None, together: bool, one: str | None,
           library: Path | None) -> None:
    from copilot.bench import models as bench_models

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    apply_offline_defaults(Settings())
    size = bench_models.QUICK if quick else bench_models.FULL
    if one:
        if library is None:
            raise click.BadParameter("--one needs --library", param_hint="--library")
        print(json.dumps(bench_models.measure(one, library, size, log)), flush=True)
        return
    target = bench_models.FIRST_WORD_TARGET_S if target_s is None else target_s
    rows = bench_models.run(quick, log, together=together)
    chosen = bench_models.choose(rows, target)
    for row in rows:
        log(f"measured: {json.dumps(row)}")
    if as_json:
        for row in rows:
            print(json.dumps(bench_models.json_row(row)), flush=True)
        log(f"chosen: {chosen['model']}; relevance weight {chosen['relevance_weight']}")
    else:
        print(bench_models.markdown(rows, chosen, target))


@bench.command(help="Recall@5 of follow-up questions with and without their conversation's context (see "
               "copilot/bench/followups.py).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N pairs of the set.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per method, one per line.")
@click.option("--detection", is_flag=True, help="Only how often follow-ups, and self-contained questions with a "
              "pronoun, are taken for follow-ups (no library needed).")
def followups(limit: int | None, as_json: bool, detection: bool) -> None:
    from copilot.bench.followups import detection as detect, markdown, run

    if detection:
        found = detect()
        if as_json:
            print(json.dumps(found))
        else:
            print(f"follow-ups taken for ones: {found['follow_ups_taken']} of {found['follow_ups']} "
                  f"({found['follow_up_rate']:.3f}); self-contained questions taken for ones: "
                  f"{found['self_contained_taken']} of {found['self_contained']} ({found['false_follow_up_rate']:.3f})")
            for question in found["missed"]:
                print(f"- missed: {question}")
            for question in found["wrongly_taken"]:
                print(f"- wrongly taken: {question}")
        return
    settings = Settings()
    apply_offline_defaults(settings)
    rows, about = run(settings, limit=limit, log=lambda message: print(message, file=sys.stderr, flush=True))
    if as_json:
        for row in rows:
            print(json.dumps(row), flush=True)
    else:
        print(markdown(rows, about))


@bench.command(hidden=True, help="The fresh-process half of `scale` (cold start, retrieval, memory).")
@click.option("--work", type=click.Path(exists=True, file_okay=False), required=True)
@click.option("--queries", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--options", required=True, help="The index options as JSON.")
def probe(work: str, queries: str, options: str) -> None:
    from copilot.bench.scale import probe as run_probe
    from copilot.storage.vectors import IndexOptions

    print(json.dumps(run_probe(Path(work), Path(queries), IndexOptions(**json.loads(options)))))
