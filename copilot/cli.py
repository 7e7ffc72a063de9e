"""The ``python -m copilot`` command line: a thin shell over the engine's functions."""

from __future__ import annotations

import json
import sys

import click

from copilot.config import Settings


def _settings(data_dir: str | None) -> Settings:
    return Settings(data_dir=data_dir) if data_dir else Settings()


@click.group(help="Paper Copilot: an academic copilot with thought memory.")
def cli() -> None:
    from copilot.config import apply_offline_defaults, get_settings

    apply_offline_defaults(get_settings())


@cli.command(help="Check that this instance can work: data dir, SQLite, FAISS, embedder, LLM.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report instead of lines.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
def doctor(as_json: bool, data_dir: str | None) -> None:
    from copilot import doctor as checks

    results = checks.run_checks(_settings(data_dir))
    if as_json:
        click.echo(json.dumps(checks.as_json(results), indent=2))
    else:
        for line in checks.format_lines(results):
            click.echo(line)
    failed = [r.name for r in results if not r.ok]
    if failed:
        click.echo(f"doctor: failed check(s): {', '.join(failed)}", err=True)
        sys.exit(1)


@cli.command(help="Rebuild every FAISS index from the embeddings kept in SQLite.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
@click.option("--json", "as_json", is_flag=True, help="Print the vector counts as JSON.")
def reindex(data_dir: str | None, as_json: bool) -> None:
    from copilot.store import Store

    with Store.open(_settings(data_dir)) as store:
        counts = store.reindex()
    if as_json:
        click.echo(json.dumps(counts))
    else:
        for kind, count in counts.items():
            click.echo(f"{kind}: {count} vectors")


@cli.command(help="Ask a question about the library; answers cite their sources and grow the thought memory.")
@click.argument("question")
@click.option("--user", "user_id", default="local", show_default=True, help="Whose thoughts to use and grow.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (waits for the thought, so the record is whole).")
@click.option("--no-thoughts", is_flag=True, help="Neither retrieve nor write thoughts.")
@click.option("--papers", default=None, help="Only these paper ids, comma-separated.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
def ask(question: str, user_id: str, as_json: bool, no_thoughts: bool, papers: str | None,
        data_dir: str | None) -> None:
    from copilot.engine import AskResult, Copilot
    from copilot.llm import LLMError

    copilot = Copilot.open(_settings(data_dir))
    paper_ids = [p.strip() for p in papers.split(",") if p.strip()] if papers else None
    shown = 0
    result: AskResult | None = None
    try:
        for update in copilot.ask_stream(question, user_id=user_id, use_thoughts=not no_thoughts,
                                         write_thought=not no_thoughts, paper_ids=paper_ids):
            if isinstance(update, AskResult):
                result = update
            elif not as_json:
                click.echo(update[shown:], nl=False)
                shown = len(update)
    except (LLMError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    assert result is not None
    copilot.flush()
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    click.echo("\n")
    for source in result.as_dict()["sources"]:
        click.echo(f"[{source['n']}] {source['label']} (score {source['score']:.2f})")
    if result.thought:
        click.echo(f"thought: {result.thought.outcome} {result.thought.reason}".rstrip())


@cli.group(help="List, show and delete thoughts.")
def thoughts() -> None:
    pass


def _memory(data_dir: str | None):  # noqa: ANN202
    from copilot.store import Store
    from copilot.thoughts import ThoughtMemory

    settings = _settings(data_dir)
    # Listing needs neither model: they are loaded only if a method needs them.
    return ThoughtMemory(Store.open(settings), embedder=None, llm=None, settings=settings)  # type: ignore[arg-type]


@thoughts.command(name="list", help="List thoughts (of one user with --user).")
@click.option("--user", "user_id", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def thoughts_list(user_id: str | None, as_json: bool, data_dir: str | None) -> None:
    memory = _memory(data_dir)
    rows = memory.list(user_id)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        flag = " [flagged]" if r["flagged"] else ""
        click.echo(f"#{r['id']:<4} depth {r['depth']} conf {r['confidence']:.2f} support {r['support']}{flag}  "
                   f"{r['text'][:90]}")
    if not rows:
        click.echo("No thoughts yet: ask questions with `python -m copilot ask`.")


@thoughts.command(name="show", help="One thought with its provenance.")
@click.argument("thought_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def thoughts_show(thought_id: int, as_json: bool, data_dir: str | None) -> None:
    row = _memory(data_dir).get(thought_id)
    if row is None:
        click.echo(f"error: no thought #{thought_id}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(row, indent=2))
        return
    click.echo(f"#{row['id']} depth {row['depth']} confidence {row['confidence']:.2f} support {row['support']}")
    click.echo(row["text"])
    for s in row["sources"]:
        click.echo(f"  from {s['kind']} #{s['id']}")


@thoughts.command(name="delete", help="Delete one thought.")
@click.argument("thought_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def thoughts_delete(thought_id: int, as_json: bool, data_dir: str | None) -> None:
    deleted = _memory(data_dir).delete(thought_id)
    if as_json:
        click.echo(json.dumps({"id": thought_id, "deleted": deleted}))
    elif deleted:
        click.echo(f"deleted thought #{thought_id}")
    if not deleted:
        click.echo(f"error: no thought #{thought_id}", err=True)
        sys.exit(1)


@cli.command(help="Seed the thought memory of a paper with simulated questions run through the pipeline.")
@click.argument("paper_id")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--questions", "n_each", default=5, show_default=True,
              help="Questions from the title and abstract, and as many from one random paragraph.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def warmup(paper_id: str, user_id: str, n_each: int, as_json: bool, data_dir: str | None) -> None:
    from dataclasses import asdict

    from copilot.engine import Copilot
    from copilot.warmup import warm_up

    copilot = Copilot.open(_settings(data_dir))
    if not copilot.store.db["papers"].count_where("id = ?", [paper_id]):
        click.echo(f"error: no paper '{paper_id}'; `python -m ingest list` shows the ids", err=True)
        sys.exit(1)
    report = warm_up(copilot, paper_id, user_id=user_id, n_abstract=n_each, n_paragraph=n_each)
    if as_json:
        click.echo(json.dumps(asdict(report), indent=2))
        return
    for question, outcome in zip(report.questions, report.outcomes, strict=True):
        click.echo(f"{outcome:<8} {question}")
    click.echo(f"{len(report.questions)} questions, {report.llm_calls} LLM calls")
