"""``python -m ingest``: add, list, show and remove papers from the command line."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from copilot.cli import Commands
from copilot.config import Settings, apply_offline_defaults
from ingest.errors import IngestError


def _settings(data_dir: str | None) -> Settings:
    settings = Settings(data_dir=data_dir) if data_dir else Settings()
    apply_offline_defaults(settings)
    return settings


def _library(data_dir: str | None):  # noqa: ANN202
    from copilot.library import Library

    return Library.open(_settings(data_dir))


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


def _on_library(data_dir: str | None, action):  # noqa: ANN001, ANN202 - action(library) -> result
    """Run ``action`` on the library and close it; an ``IngestError`` ends the command with its message."""
    library = _library(data_dir)
    try:
        return action(library)
    except IngestError as exc:
        _fail(exc)
    finally:
        library.store.close()


class _Bar:
    """Adapts the library's (fraction, message) progress to a tqdm bar."""

    def __init__(self, enabled: bool) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=100, disable=not enabled, bar_format="{l_bar}{bar}| {elapsed}", file=sys.stderr)

    def __call__(self, fraction: float, message: str) -> None:
        self._bar.set_description_str(message[:60])
        self._bar.n = int(round(100 * min(max(fraction, 0.0), 1.0)))
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


data_dir_option = click.option("--data-dir", default=None, help="Data directory (default: COPILOT_DATA_DIR or ./data).")


@click.group(cls=Commands, help="Get papers into the Paper Copilot library.")
def cli() -> None:
    pass


@cli.command(help="Add a paper: an arXiv id or URL, a PDF path, or the results of --search / --author.")
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
            papers = (library.arxiv.search(query, max_results=max_results) if query is not None
                      else library.arxiv.by_author(author, max_results=max_results))
            results, failures = library.add_many(papers, progress=bar)
        elif source is not None and (source.lower().endswith(".pdf") or Path(source).exists()):
            results = [library.add_pdf(Path(source), progress=bar)]
        else:
            results = [library.add_arxiv(source, progress=bar)]
    except IngestError as exc:
        bar.close()
        _fail(exc)
        return
    bar.close()
    warmups = _warm_up([r.paper_id for r in results if r.added], warmup_questions, data_dir, library)
    if as_json:
        click.echo(json.dumps({"results": [asdict(r) for r in results], "warmup": warmups,
                               "failures": [{"id": i, "error": e} for i, e in failures]}, indent=2))
    else:
        for r in results:
            state = "added" if r.added else "already in your library"
            click.echo(f"{r.paper_id}: {state}: {r.title} ({r.n_pages} pages, {r.n_chunks} chunks)")
            for warning in r.warnings:
                click.echo(f"  warning: {warning}")
        for paper_id, error in failures:
            click.echo(f"{paper_id}: failed: {error}", err=True)
    if failures and not results:
        sys.exit(1)


def _warm_up(paper_ids: list[str], n_each: int, data_dir: str | None, library) -> list[dict]:  # noqa: ANN001
    """Run the warm-up questions for newly added papers (see ``copilot.tasks.warmup``)."""
    if n_each <= 0 or not paper_ids:
        return []
    from copilot.engine import Copilot
    from copilot.llm import get_llm
    from copilot.tasks.warmup import warm_up

    settings = _settings(data_dir)
    copilot = Copilot(settings, library.store, library.embedder, get_llm(settings))
    reports = []
    for paper_id in paper_ids:
        report = warm_up(copilot, paper_id, user_id="local", n_abstract=n_each, n_paragraph=n_each)
        reports.append(asdict(report))
    return reports


@cli.command(name="list", help="List the papers in the library.")
@click.option("--json", "as_json", is_flag=True)
@data_dir_option
def list_papers(as_json: bool, data_dir: str | None) -> None:
    papers = [asdict(p) for p in _on_library(data_dir, lambda library: library.list())]
    if as_json:
        click.echo(json.dumps(papers, indent=2))
        return
    if not papers:
        click.echo("The library is empty: `python -m ingest add 2104.12255` or a PDF path adds one.")
    for p in papers:
        click.echo(f"{p['id']:<22} {p['n_pages'] or 0:>3}p {p['n_chunks']:>4} chunks  {p['title']}")


@cli.command(help="Show one paper: metadata, and with --sections its section tree.")
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
        click.echo(json.dumps(paper, indent=2))
        return
    click.echo(f"{paper['id']}: {paper['title']}")
    if paper.get("authors"):
        click.echo("  " + ", ".join(paper["authors"]))
    click.echo(f"  {paper['n_pages']} pages, {paper['n_chunks']} chunks, {paper['n_references']} references")
    if paper.get("abstract"):
        click.echo(f"  Abstract: {paper['abstract'][:400]}")
    for s in paper.get("sections", []):
        click.echo(f"  {'  ' * (s['level'] - 1)}- {s['title']} (p. {s['page_start']}-{s['page_end']})")


@cli.command(help="Remove a paper with its chunks and vectors; thoughts built on it are flagged.")
@click.argument("paper_id")
@data_dir_option
def remove(paper_id: str, data_dir: str | None) -> None:
    result = _on_library(data_dir, lambda library: library.remove(paper_id))
    click.echo(f"removed {result.paper_id}: {result.chunks_removed} chunks, "
               f"{result.thoughts_flagged} thoughts flagged")
