"""``python -m copilot.association``: train, simulate, eval, report, compare."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from copilot.association.adapter import load_adapter
from copilot.association.data import (
    DEFAULT_LIVES_DIR,
    DEFAULT_LOCOMO,
    load_lives,
    locomo_benchmark,
    pairs_of,
    persons_of,
    read_jsonl,
    read_memories,
    read_queries,
    split_persons,
)
from copilot.association.embedcache import EmbeddingCache
from copilot.association.evaluation import ASSOCIATION, UNTRAINED, UNTRAINED_BY_SENTENCE, evaluate, format_table
from copilot.association.report import build_report
from copilot.association.scoring import AssociativeScorer
from copilot.config import Settings, apply_offline_defaults, get_settings
from copilot.embeddings import Embedder, get_embedder

# Two kinds of module are imported by the commands that need them: torch (seconds to load; ``train`` and
# ``compare``, and the thread count) and the LLM package (``simulate``; ``report`` states that reading loads no
# LLM module, and checks it in this process).


def _embedding_cache(cache_file: str | None) -> tuple[Embedder, EmbeddingCache]:
    """The process-wide base embedder behind an in-memory (optionally on-disk) cache of its vectors."""
    settings = Settings()
    apply_offline_defaults(settings)
    embedder = get_embedder(settings)
    return embedder, EmbeddingCache.for_embedder(embedder, cache_file)


def _threads(n: int = 2) -> None:
    import torch

    torch.set_num_threads(n)


@click.group(help="Associative recall: a learned query adapter over the frozen sentence embedder.")
def cli() -> None:
    pass


@cli.command(help="Train a query adapter on simulated lives and save it (LoRA: a directory; other kinds: .npz).")
@click.option("--out", required=True, type=click.Path(), help="Adapter to write: a directory (lora) or .npz file.")
@click.option("--data", default=str(DEFAULT_LIVES_DIR), show_default=True, help="A lives_*.jsonl directory or file.")
@click.option("--val-persons", default=94, show_default=True, help="Persons held out (never trained on).")
@click.option("--split-seed", default=0, show_default=True, help="Seed of the train/held-out person split.")
@click.option("--epochs", default=None, type=int, help="Training epochs of the .npz kinds (default: TrainConfig's).")
@click.option("--seed", default=0, show_default=True, help="Seed of initialisation and batch order.")
@click.option("--kind", type=click.Choice(["lora", "residual_mlp", "linear", "mlp"]), default="lora",
              show_default=True)
@click.option("--hidden", default=384, show_default=True, help="Hidden width of the MLP forms.")
@click.option("--weight", default=None, type=float,
              help="w of the summed score, fixed instead of chosen (lora: on validation persons after training; "
                   ".npz kinds: on training persons).")
@click.option("--r", "rank", default=None, type=int, help="LoRA rank (default: LoraTrainConfig's).")
@click.option("--targets", default=None, help="LoRA target modules, comma-separated (e.g. query,value).")
@click.option("--layers", default=None, help="LoRA: BERT layers that get deltas, comma-separated, or 'all'.")
@click.option("--lr", default=None, type=float, help="LoRA learning rate.")
@click.option("--max-steps", default=None, type=int, help="LoRA steps at most (it stops early on validation).")
@click.option("--loss", type=click.Choice(["summed", "association"]), default=None,
              help="LoRA: InfoNCE on the LoRA's own term (default) or on the summed score (the ablation).")
@click.option("--negatives", type=click.Choice(["batch", "pool"]), default=None,
              help="LoRA: the batch persons' statements as candidates (default), or every fitting person's.")
@click.option("--ema", default=None, type=float,
              help="LoRA: decay of the moving average of the deltas that is validated and kept (0: none).")
@click.option("--members", default=None, type=int,
              help="LoRA: how many LoRAs to fit from their own initialisation and batch order; their mean ships.")
@click.option("--train-fraction", default=1.0, show_default=True, help="Share of the training persons used.")
@click.option("--chatter", default=0, show_default=True,
              help="MLP kinds: copies of each trigger asked inside another training person's line.")
@click.option("--real-turn-persons", default=0, show_default=True,
              help="MLP kinds: choose w on this many training persons hidden in the real conversations of --locomo.")
@click.option("--lora-val-persons", default=None, type=int,
              help="LoRA: training persons held back to choose the step and w (default 40); 0: a refit on every "
                   "training person for --max-steps steps at the fixed --weight.")
@click.option("--refit-of", default=None, type=click.Path(exists=True),
              help="LoRA: refit a validated run (its directory or association.json) on every training person: its "
                   "recipe, as many epochs as its kept step, its w. Takes no other recipe option.")
@click.option("--locomo", default=str(DEFAULT_LOCOMO), show_default=True,
              help="LoCoMo file whose turns and questions are decontaminated against ('' to skip); its turns are "
                   "the LoRA's validation distractors.")
@click.option("--decontaminate-against", "extra", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="More evaluation files (eval-command JSONL); their texts are kept out of training.")
@click.option("--threshold", default=0.9, show_default=True, help="Decontamination cosine threshold.")
@click.option("--cache", "cache_file", default=None, help="Optional .npz file keeping base embeddings between runs.")
def train(out: str, data: str, val_persons: int, split_seed: int, epochs: int | None, seed: int, kind: str,
          hidden: int, weight: float | None, rank: int | None, targets: str | None, layers: str | None,
          lr: float | None, max_steps: int | None, loss: str | None, negatives: str | None, ema: float | None,
          members: int | None, train_fraction: float, chatter: int, real_turn_persons: int,
          lora_val_persons: int | None, refit_of: str | None,
          locomo: str, extra: tuple[str, ...], threshold: float, cache_file: str | None) -> None:
    refit = _refit_record(refit_of, kind) if refit_of else None
    _threads()
    started = time.perf_counter()
    lives = load_lives(data)
    _, held_out = split_persons(persons_of(lives), val_persons, split_seed)
    if refit is not None and sorted(held_out) != sorted(refit.get("test_persons", [])):
        raise click.ClickException("The run to refit held out other persons: use its --data, --val-persons and "
                                   "--split-seed.")
    evaluation_texts = [str(r["text"]) for path in extra for r in read_jsonl(path)]
    distractors: list[str] = []
    conversations: list[list[str]] = []
    if locomo and Path(locomo).exists():
        memories, queries = locomo_benchmark(locomo)
        distractors = [m.text for m in memories]
        conversations = [[m.text for m in memories if m.group == g] for g in dict.fromkeys(m.group for m in memories)]
        evaluation_texts += distractors + [q.text for q in queries]
    embedder, cache = _embedding_cache(cache_file)
    command = " ".join(["python -m copilot.association", *sys.argv[1:]])
    if kind == "lora":
        _train_lora(out, lives, held_out, embedder, cache, distractors, evaluation_texts, started, command, refit,
                    dict(seed=seed, weight=weight, read_weight=weight, r=rank, lr=lr, max_steps=max_steps, loss=loss,
                         negatives=negatives, ema=ema, members=members, train_fraction=train_fraction,
                         n_val_persons=lora_val_persons,
                         decontamination_threshold=threshold,
                         targets=tuple(targets.split(",")) if targets else None), split_seed, layers)
        return
    from copilot.association.training import TrainConfig, train as run_training

    if train_fraction < 1.0:  # the data-size curve: a seeded share of the training persons, same held-out ones
        train_persons, _ = split_persons(persons_of(lives), val_persons, split_seed)
        random.Random(2).shuffle(train_persons)
        keep = set(train_persons[:round(train_fraction * len(train_persons))]) | set(held_out)
        lives = [life for life in lives if life.person in keep]
    config = TrainConfig(kind=kind, hidden=hidden, seed=seed, decontamination_threshold=threshold, chatter=chatter,
                         real_turn_persons=real_turn_persons)
    if epochs is not None:
        config.epochs = epochs
    config.fixed_weight = weight
    run = run_training(lives, held_out, cache, config, evaluation_texts, conversations)
    cache.save()
    run.adapter.config["split_seed"] = split_seed
    run.adapter.config["command"] = command
    path = run.adapter.save(out)
    c = run.adapter.config
    click.echo(f"persons: {c['n_train_persons']} train, {len(c['val_persons'])} held out; pairs: {c['n_pairs']} "
               f"(decontamination dropped {c['n_dropped_by_decontamination']})")
    for pair in run.info["dropped"][:3]:
        click.echo(f"  dropped ({pair['kind']}): {pair['query'][:90]!r}")
    if c.get("real_turn_weight_search"):
        click.echo(f"w search ({len(c['real_turn_persons'])} training persons in real conversations):")
    for row in c.get("real_turn_weight_search", []):
        click.echo(f"  w={row['weight']:<5} trigger R@10 asked after a chat turn "
                   f"{row['trigger_r10_real_turns_chat']:.1f}  direct R@1 {row['direct_r1_real_turns']:.1f} among "
                   f"real turns, {row['direct_r1_alone']:.1f} alone")
    if c["weight_search"]:
        click.echo("w search (5-fold cross-validation on training persons, pooled folds):")
    for row in c["weight_search"]:
        click.echo(f"  w={row['weight']:<5} trigger MRR {row['trigger_mrr']:.4f}  R@1 {row['trigger_r1']:.1f}  "
                   f"R@5 {row['trigger_r5']:.1f}  direct R@1 {row['direct_r1']:.1f}")
    click.echo(f"chosen w = {run.adapter.weight}; embeddings {run.info['encode_s']} s, fitting "
               f"{run.info['fit_s']} s, total {time.perf_counter() - started:.1f} s")
    click.echo(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")


_RECIPE_OPTIONS = ("seed", "weight", "rank", "targets", "layers", "lr", "max_steps", "loss", "negatives", "ema",
                   "members", "train_fraction", "lora_val_persons", "threshold")


def _refit_record(path: str, kind: str) -> dict:
    """The validated run's record that ``--refit-of`` names; the recipe is its own, so no recipe option may join."""
    from copilot.association.lora import CONFIG_FILE
    from copilot.association.lora_training import refit_config

    context = click.get_current_context()
    given = [param.opts[0] for param in context.command.params if param.name in _RECIPE_OPTIONS
             and context.get_parameter_source(param.name) is ParameterSource.COMMANDLINE]
    if kind != "lora" or given:
        raise click.UsageError(f"--refit-of refits a LoRA with the recipe of its record; drop "
                               f"{', '.join(given) or '--kind'}.")
    file = Path(path) / CONFIG_FILE if Path(path).is_dir() else Path(path)
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
        refit_config(record)
    except KeyError as exc:
        raise click.ClickException(f"Cannot refit from {file}: it has no {exc}.") from exc
    except (OSError, ValueError, TypeError) as exc:
        raise click.ClickException(f"Cannot refit from {file}: {exc}") from exc
    return record


def _train_lora(out: str, lives: list, held_out: list[str], embedder: Embedder, cache: EmbeddingCache,
                distractors: list[str], evaluation_texts: list[str], started: float, command: str,
                refit: dict | None, overrides: dict, split_seed: int, layers: str | None) -> None:
    from copilot.association.lora_training import LoraTrainConfig, refit_config, save_run, train_lora

    if refit is not None:
        config = refit_config(refit)
    else:
        config = LoraTrainConfig(**{k: v for k, v in overrides.items() if v is not None})
        if layers:
            config.layers = None if layers == "all" else tuple(int(n) for n in layers.split(","))
    run = train_lora(lives, held_out, cache, config, embedder.model_path, distractors, evaluation_texts,
                     progress=lambda line: click.echo("  " + line))
    cache.save()
    path = save_run(run, out, {"split_seed": split_seed, "command": command}, validation=refit)
    i = run.info
    size = sum(f.stat().st_size for f in Path(path).iterdir())
    click.echo(f"persons: {i['n_fit_persons']} fitted, {len(i['val_persons'])} validation, "
               f"{len(i['test_persons'])} held out; pairs: {i['n_pairs']} (decontamination dropped "
               f"{i['n_dropped_by_decontamination']})")
    kept = "best validation Recall@10 with distractors" if i["val_persons"] else "the last: a refit, no validation"
    click.echo(f"kept step {i['best_step']} ({kept}), read-time w {run.weight}; embeddings "
               f"{i['encode_s']} s, fitting {i['fit_s']} s, total {time.perf_counter() - started:.1f} s")
    click.echo(f"wrote {path} ({size / 1024:.0f} KiB, {i['n_parameters']:,} LoRA parameters)")


@cli.command(help="Write more simulated lives (JSONL) with the configured LLM; needs a capable endpoint.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="JSONL file to append to.")
@click.option("--n-persons", default=15, show_default=True)
@click.option("--seed", default=0, show_default=True, help="Seed of the theme choice; part of the person ids.")
@click.option("--prefix", default="sim", show_default=True, help="Person id prefix.")
@click.option("--max-tokens", default=4000, show_default=True)
def simulate(out: str, n_persons: int, seed: int, prefix: str, max_tokens: int) -> None:
    from copilot.association.simulate import simulate_lives
    from copilot.llm import get_llm

    settings = get_settings()
    apply_offline_defaults(settings)
    if settings.resolved_backend() == "local":
        click.echo("warning: the embedded small model rarely follows the simulator brief; configure an endpoint.",
                   err=True)
    stats = simulate_lives(get_llm(settings), out, n_persons, seed=seed, prefix=prefix, max_tokens=max_tokens,
                           progress=click.echo)
    click.echo(json.dumps(stats))


@cli.command("eval", help="Recall@1/5/k of queries against their group's memories: plain cosine of the whole query "
             "against the chat's recall (the combined score, a query of several sentences read sentence by sentence).")
@click.option("--memories", required=True, type=click.Path(exists=True, dir_okay=False),
              help='JSONL lines {"id", "text", "group"}.')
@click.option("--queries", required=True, type=click.Path(exists=True, dir_okay=False),
              help='JSONL lines {"id", "text", "gold": [ids], "group"}.')
@click.option("--k", default=10, show_default=True, help="Largest cut-off; Recall@1 and @5 are always reported.")
@click.option("--adapter", "adapter_path", default=None, help="Adapter file (default: the shipped one).")
@click.option("--weight", default=None, type=float, help="w of the combined score (default: the adapter's).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary only.")
@click.option("--cache", "cache_file", default=None, help="Optional .npz file keeping base embeddings.")
@click.option("--whole-message", is_flag=True,
              help="Score a query of several sentences as one text (the association scorer otherwise reads it as "
                   "the chat's recall does: the whole and each sentence).")
def eval_command(memories: str, queries: str, k: int, adapter_path: str | None, weight: float | None,
                 as_json: bool, cache_file: str | None, whole_message: bool) -> None:
    _threads()
    embedder, cache = _embedding_cache(cache_file)
    adapter = load_adapter(adapter_path, embedder.model_path)
    w = adapter.weight if weight is None else weight
    ks = sorted({c for c in (1, 5, k) if c <= k})
    scorers = {UNTRAINED: 0.0, ASSOCIATION: w} | ({} if whole_message or as_json else {UNTRAINED_BY_SENTENCE: 0.0})
    result = evaluate(read_memories(memories), read_queries(queries), cache, adapter, scorers, ks,
                      by_sentence=() if whole_message else (ASSOCIATION, UNTRAINED_BY_SENTENCE))
    cache.save()
    if as_json:
        click.echo(json.dumps(result.summary()))
    else:
        read = "each query as one text" if whole_message else "association: each query's whole and sentences"
        order = [name for name in (UNTRAINED, UNTRAINED_BY_SENTENCE, ASSOCIATION) if name in scorers]
        click.echo(format_table(result, order, f"Recall@k (w = {w}; {read})"))


@cli.command(help="Every figure: held-out persons (alone, among distractors, in real conversations), LoCoMo look-up, "
             "read-time cost.")
@click.option("--adapter", "adapter_path", default=None, help="Adapter (default: the shipped one).")
@click.option("--baseline", "baseline_path", default=None,
              help="A second adapter to compare on the same split (e.g. the residual MLP .npz).")
@click.option("--data", default=str(DEFAULT_LIVES_DIR), show_default=True)
@click.option("--locomo", default=str(DEFAULT_LOCOMO), show_default=True, help="'' to skip LoCoMo.")
@click.option("--distractors", "per_person", default=300, show_default=True,
              help="Distractor lines (LoCoMo turns) added to each held-out person's search.")
@click.option("--both-sides", is_flag=True, help="Also let the adapter read the memories (an ablation).")
@click.option("--timing-queries", default=100, show_default=True)
@click.option("--write-eval-files", "eval_dir", default=None, type=click.Path(file_okay=False),
              help="Also write the benchmarks as eval-command JSONL files into this directory.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--cache", "cache_file", default=None, help="Optional .npz file keeping base embeddings.")
def report(adapter_path: str | None, baseline_path: str | None, data: str, locomo: str, per_person: int,
           both_sides: bool, timing_queries: int, eval_dir: str | None, as_json: bool, cache_file: str | None) -> None:
    _threads()
    embedder, cache = _embedding_cache(cache_file)
    adapter = load_adapter(adapter_path, embedder.model_path)
    baseline = load_adapter(baseline_path, embedder.model_path) if baseline_path else None
    text, data_out = build_report(adapter, load_lives(data), cache, Path(locomo) if locomo else None,
                                  AssociativeScorer(embedder, adapter), timing_queries,
                                  Path(eval_dir) if eval_dir else None, baseline, per_person, both_sides)
    cache.save()
    click.echo(json.dumps(data_out, indent=2) if as_json else text)


@cli.command(help="Compare adapter forms by cross-validation over training persons (validation persons left out).")
@click.option("--data", default=str(DEFAULT_LIVES_DIR), show_default=True)
@click.option("--val-persons", default=30, show_default=True, help="Persons left out entirely, as in train.")
@click.option("--split-seed", default=0, show_default=True)
@click.option("--seeds", default=1, show_default=True, help="Seeds (each its own folds) to average over.")
@click.option("--cache", "cache_file", default=None, help="Optional .npz file keeping base embeddings.")
def compare(data: str, val_persons: int, split_seed: int, seeds: int, cache_file: str | None) -> None:
    from copilot.association.training import compare_forms

    _threads()
    lives = load_lives(data)
    train_persons, _ = split_persons(persons_of(lives), val_persons, split_seed)
    train_lives = [life for life in lives if life.person in set(train_persons)]
    _, cache = _embedding_cache(cache_file)
    click.echo(f"5-fold cross-validation over the {len(train_persons)} training persons (each fold searched as one "
               f"pool), mean over {seeds} seed(s); gains are over plain cosine on the same queries.\n")
    click.echo("| form | parameters | w chosen | trigger MRR | gain MRR | gain R@1 | gain R@5 | direct R@1 change "
               "| fit s |\n|---|---|---|---|---|---|---|---|---|")
    for row in compare_forms(pairs_of(train_lives), train_lives, cache, range(seeds)):
        click.echo("| {form} | {parameters:,} | {weights} | {mrr:.4f} | {gain_mrr:+.4f} | {gain_r1:+.2f} | "
                   "{gain_r5:+.2f} | {direct_r1:+.2f} | {fit_s:.0f} |".format(**row))
    cache.save()


@cli.command(help="The residual MLP and the LoRA by cross-validation over persons (each held out once), pooled.")
@click.option("--data", default=str(DEFAULT_LIVES_DIR), show_default=True)
@click.option("--folds", default=3, show_default=True, type=click.IntRange(min=2))
@click.option("--seed", default=0, show_default=True, help="Seed of the folds and of both trainings.")
@click.option("--locomo", default=str(DEFAULT_LOCOMO), show_default=True,
              help="LoCoMo file: its turns are the distractor lines and are kept out of training ('' for none).")
@click.option("--distractors", "per_person", default=300, show_default=True,
              help="Distractor lines added to each held-out person's search.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--cache", "cache_file", default=None, help="Optional .npz file keeping base embeddings.")
def crossval(data: str, folds: int, seed: int, locomo: str, per_person: int, as_json: bool,
             cache_file: str | None) -> None:
    from copilot.association.crossval import cross_validate, markdown

    _threads()
    started = time.perf_counter()
    lives = load_lives(data)
    distractors: list[str] = []
    evaluation_texts: list[str] = []
    if locomo and Path(locomo).exists():
        memories, queries = locomo_benchmark(locomo)
        distractors = [m.text for m in memories]
        evaluation_texts = distractors + [q.text for q in queries]
    embedder, cache = _embedding_cache(cache_file)
    try:
        result = cross_validate(lives, cache, embedder.model_path, distractors, evaluation_texts, folds, seed,
                                per_person, progress=lambda line: click.echo(line, err=True))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    finally:
        cache.save()
    result["total_s"] = round(time.perf_counter() - started, 1)
    click.echo(json.dumps(result, indent=2) if as_json else markdown(result) + f"\n\nTotal {result['total_s']} s.")
