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
