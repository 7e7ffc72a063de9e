"""The ``python -m copilot`` command line: a thin shell over the engine's functions."""

from __future__ import annotations

import json
import sys

import click

from copilot.config import Settings


def _settings(data_dir: str | None) -> Settings:
    return Settings(data_dir=data_dir) if data_dir else Settings()


class _StorageErrors:
    """Ends a command with one ``error:`` line and exit status 1 when the database cannot be used (damaged, a
    directory, no permission): the message comes from the storage layer."""

    def invoke(self, ctx: click.Context):  # noqa: ANN201 - whatever the command returns
        try:
            return super().invoke(ctx)
        except Exception as exc:
            from copilot.storage import StorageError

            if not isinstance(exc, StorageError):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


class Commands(_StorageErrors, click.Group):
    """A command group whose every command reports an unusable database in one line."""


class Command(_StorageErrors, click.Command):
    """A single command that reports an unusable database in one line."""


@click.group(cls=Commands, help="Paper Copilot: an academic copilot with thought memory.")
def cli() -> None:
    from copilot.config import apply_offline_defaults, get_settings

    apply_offline_defaults(get_settings())


@cli.command(help="Check that this instance can work: data dir, SQLite, indices against the database, orphan "
             "files, FAISS, embedder, LLM.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report instead of lines.")
@click.option("--repair", is_flag=True, help="Rebuild an index that differs from the database and remove orphan "
              "files (stored PDFs no paper uses, leftovers of killed adds and index saves).")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
def doctor(as_json: bool, repair: bool, data_dir: str | None) -> None:
    from copilot.tools import doctor as checks

    results = checks.run_checks(_settings(data_dir), repair=repair)
    if as_json:
        click.echo(json.dumps(checks.as_json(results), indent=2))
    else:
        for line in checks.format_lines(results):
            click.echo(line)
    failed = [r.name for r in results if not r.ok]
    unusable = next((r for r in results if "unusable" in r.data), None)
    if unusable is not None:
        click.echo(f"error: {unusable.detail}", err=True)
    if failed:
        click.echo(f"doctor: failed check(s): {', '.join(failed)}", err=True)
        sys.exit(1)


@cli.command(help="Rebuild every FAISS index from the embeddings kept in SQLite.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
@click.option("--json", "as_json", is_flag=True, help="Print the vector counts as JSON.")
def reindex(data_dir: str | None, as_json: bool) -> None:
    from copilot.storage import Store

    with Store.open(_settings(data_dir)) as store:
        counts = store.reindex()
    if as_json:
        click.echo(json.dumps(counts))
    else:
        for kind, count in counts.items():
            click.echo(f"{kind}: {count} vectors")


@cli.command(help="Copy the embedded instance (the SQLite data directory) into PostgreSQL with its ids, then check "
             "the copy by rows per table and by sampled searches on both. Running it again adds only what is "
             "missing.")
@click.option("--to", "url", required=True, metavar="postgresql://…", help="The PostgreSQL database to copy into.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 100_000),
              help="Rows read and written at a time.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of the verdict line.")
def migrate(url: str, data_dir: str | None, batch: int, as_json: bool) -> None:
    from copilot.config import backend_of
    from copilot.storage import StorageError, Store, StoreError
    from copilot.storage.copy import copy_store
    from copilot.storage.store import SERVER_BACKENDS
    from copilot.storage.postgres import PostgresStore

    settings = _settings(data_dir)
    if backend_of(url) not in SERVER_BACKENDS:
        raise click.UsageError("--to takes a postgresql:// URL")
    if not settings.db_path.is_file():
        raise StorageError(f"no embedded database at {settings.db_path}: pass the data directory with --data-dir")
    options = Store.index_options_from(settings)

    def progress(table: str, done: int, total: int) -> None:
        click.echo(f"{table}: {done}/{total} rows", err=True)

    with Store(settings.db_path, settings.index_dir, options) as source, \
            PostgresStore(url, options, settings.database_pool_size) as target:
        click.echo(f"copying {settings.db_path} into {target.where}", err=True)
        try:
            report = copy_store(source, target, batch=batch, progress=progress)
        except StoreError as exc:
            if isinstance(exc, StorageError):
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    if not report.ok:
        click.echo(f"error: {report.verdict()}", err=True)
        sys.exit(1)
    if not as_json:
        click.echo(report.verdict())


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
    from copilot.errors import SHOWN, one_line
    from copilot.limits import check_question

    settings = _settings(data_dir)
    try:  # before the models load: a question that cannot be asked costs nothing
        question = check_question(question, settings)
    except SHOWN as exc:
        click.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(1)
    copilot = Copilot.open(settings)
    paper_ids = [p.strip() for p in papers.split(",") if p.strip()] if papers else None
    shown = 0
    result: AskResult | None = None
    try:  # the chat's turn: the user's persona and recalled memories personalise it, their statements are kept
        if paper_ids:
            copilot.visible_paper_ids(user_id, paper_ids)  # only papers this user may see, as in the chat
        for update in copilot.chat_stream(user_id, question, paper_ids=paper_ids, use_thoughts=not no_thoughts,
                                          write_thought=not no_thoughts):
            if isinstance(update, AskResult):
                result = update
            elif isinstance(update, str) and not as_json:
                click.echo(update[shown:], nl=False)
                shown = len(update)
    except SHOWN as exc:
        click.echo(f"error: {one_line(exc)}", err=True)
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
    from copilot.storage import Store
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
    rows = [t.to_dict() for t in memory.list(user_id)]
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
    thought = _memory(data_dir).get(thought_id)
    if thought is None:
        click.echo(f"error: no thought #{thought_id}", err=True)
        sys.exit(1)
    row = thought.to_dict()
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
    from copilot.tasks.warmup import warm_up

    copilot = Copilot.open(_settings(data_dir))
    if not copilot.store.papers.exists(paper_id):
        click.echo(f"error: no paper '{paper_id}'; `python -m ingest list` shows the ids", err=True)
        sys.exit(1)
    report = warm_up(copilot, paper_id, user_id=user_id, n_abstract=n_each, n_paragraph=n_each)
    if as_json:
        click.echo(json.dumps(asdict(report), indent=2))
        return
    for question, outcome in zip(report.questions, report.outcomes, strict=True):
        click.echo(f"{outcome:<8} {question}")
    click.echo(f"{len(report.questions)} questions, {report.llm_calls} LLM calls")


# ----- writing, ideas, refresh -------------------------------------------------------------------------


def _ids(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _run_task(task, data_dir: str | None):  # noqa: ANN001, ANN202 - task(copilot) -> result
    """Open the copilot and run ``task``; a user-facing failure ends the command with one ``error:`` line."""
    from copilot.engine import Copilot
    from copilot.llm import LLMError
    from ingest.errors import IngestError

    copilot = Copilot.open(_settings(data_dir))
    try:
        return task(copilot)
    except (ValueError, LLMError, IngestError, RuntimeError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        copilot.store.close()


def _show(result, as_json: bool, out: str | None) -> None:  # noqa: ANN001 - a Draft or Trends
    """Print JSON or Markdown; ``out`` also writes the Markdown to a file."""
    from pathlib import Path

    markdown = result.to_markdown()
    if out:
        Path(out).write_text(markdown, encoding="utf-8")
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        click.echo(markdown)


@cli.group(help="Draft an abstract, a synthesis of several papers, or a related-work section, with citations.")
def draft() -> None:
    pass


@draft.command(name="abstract", help="Write PAPER_ID's abstract from its body; with --papers, a synthesis of them.")
@click.argument("paper_id", required=False)
@click.option("--papers", default=None, help="Comma-separated paper ids: write a synthesis over them instead.")
@click.option("--user", "user_id", default="local", show_default=True, help="Whose library to draw on.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: text, citations, references, BibTeX, timings.")
@click.option("--out", default=None, help="Also write the Markdown (text and references) to this file.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
def draft_abstract_command(paper_id: str | None, papers: str | None, user_id: str, as_json: bool, out: str | None,
                           data_dir: str | None) -> None:
    from copilot.tasks import writing

    if (paper_id is None) == (papers is None):
        raise click.UsageError("give either PAPER_ID or --papers ID,ID")
    if papers is not None:
        result = _run_task(lambda c: writing.draft_synthesis(c, _ids(papers) or [], user_id=user_id), data_dir)
    else:
        result = _run_task(lambda c: writing.draft_abstract(c, paper_id, user_id=user_id), data_dir)
    _show(result, as_json, out)


@draft.command(name="related", help="Write the related-work section of your paper from the library (and arXiv).")
@click.option("--title", required=True, help="Your paper's title.")
@click.option("--abstract", default="", help="Your paper's abstract.")
@click.option("--papers", default=None, help="Only these library papers, comma-separated.")
@click.option("--arxiv", "search_arxiv", is_flag=True, help="Also search arXiv (falls back to the library offline).")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--out", default=None, help="Also write the Markdown to this file.")
@click.option("--data-dir", default=None)
def draft_related_command(title: str, abstract: str, papers: str | None, search_arxiv: bool, user_id: str,
                          as_json: bool, out: str | None, data_dir: str | None) -> None:
    from copilot.tasks import writing

    result = _run_task(lambda c: writing.draft_related_work(
        c, title, abstract, user_id=user_id, paper_ids=_ids(papers), search_arxiv=search_arxiv), data_dir)
    _show(result, as_json, out)


@cli.command(help="Trend keywords and research ideas from your persona and the newest papers you can see.")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--persona", default=None, help="Describe the researcher (default: the stored profile).")
@click.option("--papers", default=None, help="Only these paper ids, comma-separated.")
@click.option("--max", "max_papers", default=8, show_default=True, help="How many of the newest papers to use.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--out", default=None, help="Also write the Markdown to this file.")
@click.option("--data-dir", default=None)
def ideas(user_id: str, persona: str | None, papers: str | None, max_papers: int, as_json: bool, out: str | None,
          data_dir: str | None) -> None:
    from copilot.tasks.trends import trends_and_ideas

    result = _run_task(lambda c: trends_and_ideas(c, user_id=user_id, persona=persona, paper_ids=_ids(papers),
                                                  max_papers=max_papers), data_dir)
    _show(result, as_json, out)


@cli.command(help="Add the newest arXiv papers of categories (default: the ones --user follows).")
@click.option("--category", "categories", multiple=True, help="An arXiv category such as cs.CL; repeat for more.")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--max", "max_per_category", default=5, show_default=True, help="Newest papers per category.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def refresh(categories: tuple[str, ...], user_id: str, max_per_category: int, as_json: bool,
            data_dir: str | None) -> None:
    from copilot.tasks.refresh import followed_categories, refresh_categories
    from copilot.library import Library

    library = Library.open(_settings(data_dir))
    try:
        wanted = list(categories) or followed_categories(library.store, user_id)
        if not wanted:
            raise ValueError("no categories: pass --category cs.CL, or follow some first")
        result = refresh_categories(library, wanted, user_id=user_id, max_per_category=max_per_category)
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        library.store.close()
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        click.echo(f"{', '.join(result.categories)}: {len(result.added)} added, {result.skipped} already there")
        for paper_id in result.added:
            click.echo(f"  added {paper_id}")
        for error in result.errors:
            click.echo(f"  failed: {error}", err=True)
    if result.errors and not result.added and not result.skipped:
        sys.exit(1)
