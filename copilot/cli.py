"""The ``python -m copilot`` command line: a thin shell over the engine's functions.

``papers`` gets papers into the library (add, list, show, remove), ``bench`` runs the benchmarks of
:mod:`copilot.bench`, and the other commands ask, write and keep the instance. An error a user sees
(:data:`copilot.errors.SHOWN`: an unusable database, a paper that cannot be added, an LLM that cannot answer) ends
any command with one ``error:`` line and exit status 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import click
from tqdm import tqdm

from copilot.bench.cli import bench
from copilot.config import Settings, apply_offline_defaults, get_settings
from copilot.errors import SHOWN, one_line, printable

if TYPE_CHECKING:
    from copilot.engine import Copilot
    from copilot.library import Library
    from copilot.thoughts import ThoughtMemory

_T = TypeVar("_T")


def echo(message: Any = None, **kwargs: Any) -> None:  # noqa: ANN401 - what click.echo takes
    """``click.echo`` without terminal escape sequences or control characters in what reaches the terminal (a
    paper's title or a file name may carry them)."""
    click.echo(None if message is None else printable(str(message)), **kwargs)


def _settings(data_dir: str | None) -> Settings:
    return Settings(data_dir=data_dir) if data_dir else Settings()


class _ShownErrors:
    """Ends a command with one ``error:`` line and exit status 1 for an error a user sees (``SHOWN``); the
    message is the error's own."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except SHOWN as exc:
            echo(f"error: {one_line(exc)}", err=True)
            ctx.exit(1)


class Commands(_ShownErrors, click.Group):
    """A command group whose every command ends an error a user sees with its one line."""


class Command(_ShownErrors, click.Command):
    """A single command that ends an error a user sees with its one line."""


@click.group(cls=Commands, help="Paper Copilot: an academic copilot with thought memory. `papers add` gets "
             "papers in, `ask` answers from them with citations; every command takes --help.")
def cli() -> None:
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
        echo(json.dumps(checks.as_json(results), indent=2))
    else:
        for line in checks.format_lines(results):
            echo(line)
    failed = [r.name for r in results if not r.ok]
    unusable = next((r for r in results if "unusable" in r.data), None)
    if unusable is not None:
        echo(f"error: {unusable.detail}", err=True)
    if failed:
        echo(f"doctor: failed check(s): {', '.join(failed)}", err=True)
        sys.exit(1)


@cli.command(help="Rebuild every FAISS index from the embeddings kept in SQLite.")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
@click.option("--json", "as_json", is_flag=True, help="Print the vector counts as JSON.")
def reindex(data_dir: str | None, as_json: bool) -> None:
    from copilot.storage import Store

    with Store.open(_settings(data_dir)) as store:
        counts = store.reindex()
    if as_json:
        echo(json.dumps(counts))
    else:
        for kind, count in counts.items():
            echo(f"{kind}: {count} vectors")


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
    from copilot.storage import StorageError, Store
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
        echo(f"{table}: {done}/{total} rows", err=True)

    with Store(settings.db_path, settings.index_dir, options) as source, \
            PostgresStore(url, options, settings.database_pool_size) as target:
        echo(f"copying {settings.db_path} into {target.where}", err=True)
        report = copy_store(source, target, batch=batch, progress=progress)
    if as_json:
        echo(json.dumps(report.as_dict(), indent=2))
    if not report.ok:
        echo(f"error: {report.verdict()}", err=True)
        sys.exit(1)
    if not as_json:
        echo(report.verdict())


@cli.command(help="Ask a question about the library; answers cite their sources and grow the thought memory.")
@click.argument("question")
@click.option("--user", "user_id", default="local", show_default=True, help="Whose thoughts to use and grow.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (waits for the thought, so the record is whole).")
@click.option("--no-thoughts", is_flag=True, help="Neither retrieve nor write thoughts.")
@click.option("--papers", default=None, help="Only these paper ids, comma-separated.")
@click.option("--conversation", "conversation_id", type=int, default=None,
              help="Continue this kept conversation of --user (default: start a new one).")
@click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")
def ask(question: str, user_id: str, as_json: bool, no_thoughts: bool, papers: str | None,
        conversation_id: int | None, data_dir: str | None) -> None:
    from copilot.answering import quote_line
    from copilot.engine import AskResult, Copilot
    from copilot.errors import SHOWN, one_line
    from copilot.limits import check_question

    settings = _settings(data_dir)
    try:  # before the models load: a question that cannot be asked costs nothing
        question = check_question(question, settings)
    except SHOWN as exc:
        echo(f"error: {one_line(exc)}", err=True)
        sys.exit(1)
    copilot = Copilot.open(settings)
    paper_ids = [p.strip() for p in papers.split(",") if p.strip()] if papers else None
    shown = 0
    result: AskResult | None = None
    try:  # the chat's turn: the user's persona and recalled memories personalise it, their statements are kept
        for update in copilot.chat_stream(user_id, question, paper_ids=paper_ids, use_thoughts=not no_thoughts,
                                          write_thought=not no_thoughts, conversation_id=conversation_id):
            if isinstance(update, AskResult):
                result = update
            elif isinstance(update, str) and not as_json:
                if not shown and update:
                    echo("draft (unchecked; the checked answer follows):", err=True)
                echo(update[shown:], nl=False)
                shown = len(update)
    except SHOWN as exc:
        echo(f"error: {one_line(exc)}", err=True)
        sys.exit(1)
    assert result is not None
    copilot.flush()
    if as_json:
        echo(json.dumps(result.as_dict() | {"conversation_id": result.conversation_id,
                                                  "searched_for": result.searched_for}, indent=2))
        return
    echo("\n")
    if result.declined:
        echo(result.to_markdown())
        echo()
    elif result.grounding and result.grounding.unsupported:
        weak = result.grounding.unsupported
        echo(f"marked ⚠️ ({len(weak)} of {len(result.grounding.sentences)} sentences: unsupported by the sources, "
             "or not said again when the model answered again):")
        for sentence in weak:
            flaws = f"; {sentence.flaws()}" if sentence.flaws() else ""
            echo(f"  - {sentence.sentence.strip()} (support {sentence.support:.2f}{flaws})")
    if result.evidence:
        echo("evidence:")
        for quote in result.evidence:
            echo(f"  {quote_line(quote)}")
    for source in result.as_dict()["sources"]:
        echo(f"[{source['n']}] {source['label']} (score {source['score']:.2f})")
    if result.thought:
        echo(f"thought: {result.thought.outcome} {result.thought.reason}".rstrip())
    searched = f", searched for: {result.searched_for}" if result.searched_for else ""
    echo(f"conversation #{result.conversation_id} (continue it with --conversation {result.conversation_id})"
               f"{searched}")


@cli.group(cls=Commands, help="List and export kept conversations (`ask --conversation N` continues one).")
def conversations() -> None:
    pass


@conversations.command(name="list", help="The user's conversations, newest first.")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def conversations_list(user_id: str, as_json: bool, data_dir: str | None) -> None:
    from copilot.engine import Copilot

    found = Copilot.open(_settings(data_dir)).conversations(user_id)
    if as_json:
        echo(json.dumps([vars(c) for c in found], indent=2))
        return
    for c in found:
        echo(f"#{c.id:<4} {c.n_turns} question(s)  {(c.updated_at or '')[:16]}  {c.title}")
    if not found:
        echo("No conversations yet: ask with `python -m copilot ask`.")


@conversations.command(name="export", help="One conversation as Markdown: answers, references, thought outcomes.")
@click.argument("conversation_id", type=int)
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write it to this file (default: print).")
@click.option("--data-dir", default=None)
def conversations_export(conversation_id: int, user_id: str, out: str | None, data_dir: str | None) -> None:
    from copilot.engine import Copilot

    _, text = Copilot.open(_settings(data_dir)).export_conversation(conversation_id, user_id)
    if out:
        Path(out).write_text(text, encoding="utf-8")
        echo(f"wrote {out}")
    else:
        echo(text, nl=False)


@cli.group(help="List, show and delete thoughts.")
def thoughts() -> None:
    pass


def _memory(data_dir: str | None) -> ThoughtMemory:
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
        echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        flag = " [flagged]" if r["flagged"] else ""
        echo(f"#{r['id']:<4} depth {r['depth']} conf {r['confidence']:.2f} support {r['support']}{flag}  "
                   f"{r['text'][:90]}")
    if not rows:
        echo("No thoughts yet: ask questions with `python -m copilot ask`.")


@thoughts.command(name="show", help="One thought with its provenance.")
@click.argument("thought_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def thoughts_show(thought_id: int, as_json: bool, data_dir: str | None) -> None:
    thought = _memory(data_dir).get(thought_id)
    if thought is None:
        echo(f"error: no thought #{thought_id}", err=True)
        sys.exit(1)
    row = thought.to_dict()
    if as_json:
        echo(json.dumps(row, indent=2))
        return
    echo(f"#{row['id']} depth {row['depth']} confidence {row['confidence']:.2f} support {row['support']}")
    echo(row["text"])
    for s in row["sources"]:
        echo(f"  from {s['kind']} #{s['id']}")


@thoughts.command(name="delete", help="Delete one thought.")
@click.argument("thought_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def thoughts_delete(thought_id: int, as_json: bool, data_dir: str | None) -> None:
    deleted = _memory(data_dir).delete(thought_id)
    if as_json:
        echo(json.dumps({"id": thought_id, "deleted": deleted}))
    elif deleted:
        echo(f"deleted thought #{thought_id}")
    if not deleted:
        echo(f"error: no thought #{thought_id}", err=True)
        sys.exit(1)


@cli.command(help="Seed the thought memory of a paper with simulated questions run through the pipeline.")
@click.argument("paper_id")
@click.option("--user", "user_id", default="local", show_default=True)
@click.option("--questions", "n_each", default=5, show_default=True,
              help="Questions from the title and abstract, and as many from one random paragraph.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--data-dir", default=None)
def warmup(paper_id: str, user_id: str, n_each: int, as_json: bool, data_dir: str | None) -> None:
    from copilot.engine import Copilot
    from copilot.tasks.warmup import warm_up

    copilot = Copilot.open(_settings(data_dir))
    if not copilot.store.papers.exists(paper_id):
        echo(f"error: no paper '{paper_id}'; `python -m copilot papers list` shows the ids", err=True)
        sys.exit(1)
    report = warm_up(copilot, paper_id, user_id=user_id, n_abstract=n_each, n_paragraph=n_each)
    if as_json:
        echo(json.dumps(asdict(report), indent=2))
        return
    for question, outcome in zip(report.questions, report.outcomes, strict=True):
        echo(f"{outcome:<8} {question}")
    echo(f"{len(report.questions)} questions, {report.llm_calls} LLM calls")


# ----- writing, ideas, refresh -------------------------------------------------------------------------


def _ids(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _run_task(task: Callable[[Copilot], _T], data_dir: str | None) -> _T:
    """Open the copilot and run ``task``; a user-facing failure ends the command with one ``error:`` line."""
    from copilot.engine import Copilot
    from copilot.llm import LLMError
    from ingest.errors import IngestError

    copilot = Copilot.open(_settings(data_dir))
    try:
        return task(copilot)
    except (ValueError, LLMError, IngestError, RuntimeError) as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        copilot.store.close()


class _Written(Protocol):
    """A written result (a draft, trends and ideas): Markdown to read, a dict to print as JSON."""

    def to_markdown(self) -> str: ...

    def as_dict(self) -> dict[str, Any]: ...


def _show(result: _Written, as_json: bool, out: str | None) -> None:
    """Print JSON or Markdown; ``out`` also writes the Markdown to a file."""
    markdown = result.to_markdown()
    if out:
        Path(out).write_text(markdown, encoding="utf-8")
    if as_json:
        echo(json.dumps(result.as_dict(), indent=2))
    else:
        echo(markdown)


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


@cli.command(help="A comparison table of 2 to 10 papers: one row a paper, one column an aspect, each cell with the "
             "sentence that shows it, or 'not stated'.")
@click.argument("paper_ids", nargs=-1, required=True)
@click.option("--aspect", "aspects", multiple=True, help="A column (repeatable; default: task, data, method, metric, "
              "main result, limitation).")
@click.option("--user", "user_id", default="local", show_default=True, help="Whose library to draw on.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: cells with their evidence, Markdown, BibTeX.")
@click.option("--csv", "csv_out", default=None, help="Also write the table as CSV to this file.")
@click.option("--bibtex", "bib_out", default=None, help="Also write the rows' BibTeX to this file.")
@click.option("--out", default=None, help="Also write the Markdown to this file.")
@click.option("--data-dir", default=None)
def compare(paper_ids: tuple[str, ...], aspects: tuple[str, ...], user_id: str, as_json: bool, csv_out: str | None,
            bib_out: str | None, out: str | None, data_dir: str | None) -> None:
    from copilot.tasks.compare import Comparison

    def fill(copilot: Copilot) -> Comparison:
        table = None
        for update in copilot.compare(user_id, list(paper_ids), list(aspects) or None):
            if isinstance(update, Comparison):
                table = update
            elif not as_json:
                echo(f"{update.paper_id} · {update.aspect}: {update.shown()}", err=True)
        assert table is not None
        return table

    table = _run_task(fill, data_dir)
    if csv_out:
        Path(csv_out).write_text(table.to_csv(), encoding="utf-8")
    if bib_out:
        Path(bib_out).write_text(table.bibtex(), encoding="utf-8")
    _show(table, as_json, out)


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
    from copilot.library import Library
    from copilot.tasks.refresh import followed_categories, refresh_categories

    library = Library.open(_settings(data_dir))
    try:
        wanted = list(categories) or followed_categories(library.store, user_id)
        if not wanted:
            raise ValueError("no categories: pass --category cs.CL, or follow some first")
        result = refresh_categories(library, wanted, user_id=user_id, max_per_category=max_per_category)
    except ValueError as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(1)
    finally:
        library.store.close()
    if as_json:
        echo(json.dumps(result.as_dict(), indent=2))
    else:
        echo(f"{', '.join(result.categories)}: {len(result.added)} added, {result.skipped} already there")
        for paper_id in result.added:
            echo(f"  added {paper_id}")
        for error in result.errors:
            echo(f"  failed: {error}", err=True)
    if result.errors and not result.added and not result.skipped:
        sys.exit(1)


# ----- papers ------------------------------------------------------------------------------------------

data_dir_option = click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")


def _library_settings(data_dir: str | None) -> Settings:
    settings = _settings(data_dir)
    apply_offline_defaults(settings)
    return settings


def _library(data_dir: str | None) -> Library:
    from copilot.library import Library  # the storage and embedding modules load only for a command that needs them

    return Library.open(_library_settings(data_dir))


def _on_library(data_dir: str | None, action: Callable[[Library], _T]) -> _T:
    """Run ``action`` on the library, then close it."""
    library = _library(data_dir)
    try:
        return action(library)
    finally:
        library.store.close()


class _Bar:
    """Adapts the library's (fraction, message) progress to a tqdm bar."""

    def __init__(self, enabled: bool) -> None:
        self._bar = tqdm(total=100, disable=not enabled, bar_format="{l_bar}{bar}| {elapsed}", file=sys.stderr)

    def __call__(self, fraction: float, message: str) -> None:
        self._bar.set_description_str(printable(message)[:60])
        self._bar.n = int(round(100 * min(max(fraction, 0.0), 1.0)))
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


@cli.group(cls=Commands, help="Get papers into the Paper Copilot library.")
def papers() -> None:
    pass


@papers.command(help="Add a paper: an arXiv id or URL, a PDF path, or the results of --search / --author.")
@click.argument("source", required=False)
@click.option("--search", "query", default=None, help="Free-text arXiv search; adds the top results.")
@click.option("--author", default=None, help="Add papers by this author (an arXiv au: search).")
@click.option("--max", "max_results", default=5, show_default=True, help="How many search results to add.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--warmup", "warmup_questions", default=0, show_default=True,
              help="Seed thoughts: ask this many simulated questions from the abstract and from a paragraph.")
@data_dir_option
def add(source: str | None, query: str | None, author: str | None, max_results: int, as_json: bool, quiet: bool,
        warmup_questions: int, data_dir: str | None) -> None:
    if sum(x is not None for x in (source, query, author)) != 1:
        raise click.UsageError("give exactly one of: an arXiv id / PDF path, --search, --author")
    library = _library(data_dir)
    bar = _Bar(enabled=not quiet and not as_json)
    failures: list[tuple[str, str]] = []
    try:
        if query is not None or author is not None:
            found = (library.arxiv.search(query, max_results=max_results) if query is not None
                     else library.arxiv.by_author(author, max_results=max_results))
            results, failures = library.add_many(found, progress=bar)
        elif source is not None and (source.lower().endswith(".pdf") or Path(source).exists()):
            results = [library.add_pdf(Path(source), progress=bar)]
        else:
            results = [library.add_arxiv(source, progress=bar)]
    finally:
        bar.close()
    warmups = _warm_up([r.paper_id for r in results if r.added], warmup_questions, data_dir, library)
    if as_json:
        echo(json.dumps({"results": [asdict(r) for r in results], "warmup": warmups,
                               "failures": [{"id": i, "error": e} for i, e in failures]}, indent=2))
    else:
        for r in results:
            state = "added" if r.added else "already in your library"
            echo(f"{r.paper_id}: {state}: {r.title} ({r.n_pages} pages, {r.n_chunks} chunks)")
            for warning in r.warnings:
                echo(f"  warning: {warning}")
        for paper_id, error in failures:
            echo(f"{paper_id}: failed: {error}", err=True)
    if failures and not results:
        sys.exit(1)


def _warm_up(paper_ids: list[str], n_each: int, data_dir: str | None, library: Library) -> list[dict]:
    """Run the warm-up questions for newly added papers (see ``copilot.tasks.warmup``)."""
    if n_each <= 0 or not paper_ids:
        return []
    from copilot.engine import Copilot  # the engine and the LLM load only when there are questions to ask
    from copilot.llm import get_llm
    from copilot.tasks.warmup import warm_up

    settings = _library_settings(data_dir)
    copilot = Copilot(settings, library.store, library.embedder, get_llm(settings))
    reports = []
    for paper_id in paper_ids:
        report = warm_up(copilot, paper_id, user_id="local", n_abstract=n_each, n_paragraph=n_each)
        reports.append(asdict(report))
    return reports


@papers.command(name="sync-zotero", help="Add what is new or changed in your Zotero library: items with an arXiv "
                "id from arXiv, items with a stored PDF through the upload checks; others are listed as metadata "
                "only. Give --library-id (and --api-key) or --local once to connect; later runs sync again.")
@click.option("--library-id", default=None, help="Your Zotero user id (zotero.org/settings/keys), or a group's id.")
@click.option("--api-key", default=None, help="A Zotero API key that may read the library (asked for when "
              "connecting without one; none for a public library).")
@click.option("--group", is_flag=True, help="The id is a group library's.")
@click.option("--collection", default="", help="Only this collection (its 8-character key).")
@click.option("--local", is_flag=True, help="Zotero 7's local API on this machine, instead of the web API.")
@click.option("--disconnect", is_flag=True, help="Delete the connection and its stored key (the papers stay).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@data_dir_option
def sync_zotero(library_id: str | None, api_key: str | None, group: bool, collection: str, local: bool,
                disconnect: bool, as_json: bool, quiet: bool, data_dir: str | None) -> None:
    from copilot.engine import Copilot

    copilot = Copilot.open(_settings(data_dir))
    bar = _Bar(enabled=not quiet and not as_json)
    try:
        if disconnect:
            copilot.disconnect_zotero("local")
            echo("Zotero disconnected; its key is deleted.")
            return
        if library_id is not None or local:
            if api_key is None and not local:
                api_key = click.prompt("Zotero API key (empty for a public library)", default="", hide_input=True,
                                       show_default=False)
            copilot.connect_zotero("local", library_id or "0", api_key or "", collection=collection, local=local,
                                   library_type="group" if group else "user")
        report = copilot.sync_zotero("local", bar)
    except SHOWN as exc:
        bar.close()
        echo(f"error: {one_line(exc)}", err=True)
        sys.exit(1)
    finally:
        bar.close()
    if as_json:
        echo(json.dumps(report, indent=2))
        return
    for line in report["items"]:
        echo(f"{line['item']}: {line['status']}: {printable(line['title'])[:70]} ({printable(line['message'])})")
    echo(f"added {report['added']}, already in the library {report['already']}, metadata only "
         f"{report['metadata_only']}, unchanged {report['unchanged']}, failed {report['failed']}, left for the next "
         f"sync {report['left']}")
    if report["failed"] and not (report["added"] or report["already"] or report["metadata_only"]):
        sys.exit(1)


@papers.command(name="list", help="List the papers in the library.")
@click.option("--json", "as_json", is_flag=True)
@data_dir_option
def list_papers(as_json: bool, data_dir: str | None) -> None:
    listed = [asdict(p) for p in _on_library(data_dir, lambda library: library.list())]
    if as_json:
        echo(json.dumps(listed, indent=2))
        return
    if not listed:
        echo("The library is empty: `python -m copilot papers add 2104.12255` or a PDF path adds one.")
    for p in listed:
        echo(f"{p['id']:<22} {p['n_pages'] or 0:>3}p {p['n_chunks']:>4} chunks  {p['title']}")


@papers.command(help="Show one paper: metadata, and with --sections its section tree.")
@click.argument("paper_id")
@click.option("--sections", is_flag=True, help="Include the section tree.")
@click.option("--json", "as_json", is_flag=True)
@data_dir_option
def show(paper_id: str, sections: bool, as_json: bool, data_dir: str | None) -> None:
    paper = asdict(_on_library(data_dir, lambda library: library.show(paper_id)))
    if not sections:
        paper.pop("sections", None)
    paper["n_references"] = len(paper.pop("references"))
    if as_json:
        echo(json.dumps(paper, indent=2))
        return
    echo(f"{paper['id']}: {paper['title']}")
    if paper.get("authors"):
        echo("  " + ", ".join(paper["authors"]))
    echo(f"  {paper['n_pages']} pages, {paper['n_chunks']} chunks, {paper['n_references']} references")
    if paper.get("abstract"):
        echo(f"  Abstract: {paper['abstract'][:400]}")
    for s in paper.get("sections", []):
        echo(f"  {'  ' * (s['level'] - 1)}- {s['title']} (p. {s['page_start']}-{s['page_end']})")


@papers.command(help="Remove a paper with its chunks and vectors; thoughts built on it are flagged.")
@click.argument("paper_id")
@data_dir_option
def remove(paper_id: str, data_dir: str | None) -> None:
    result = _on_library(data_dir, lambda library: library.remove(paper_id))
    echo(f"removed {result.paper_id}: {result.chunks_removed} chunks, "
               f"{result.thoughts_flagged} thoughts flagged")


# ----- benchmarks --------------------------------------------------------------------------------------

cli.add_command(bench)
