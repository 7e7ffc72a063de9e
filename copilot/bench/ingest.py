"""``python -m copilot.bench.ingest`` (``make bench-ingest``): ingest speed on real papers, embedding included.

For each PDF: parse, chunk and embed times, pages/s and chunks/s, and the whole add through the library (into
a temporary data directory). Model loading is measured once and reported apart: a running app pays it once.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import click

from copilot.config import DATA_ROOT, Settings, apply_offline_defaults
from copilot.library import Library
from ingest.chunking import chunk_paper
from ingest.pdf import parse_pdf

DEFAULT_PAPERS = DATA_ROOT / "papers"


def bench_paper(path: Path, library: Library, repeats: int) -> dict:
    best: dict[str, float] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        parsed = parse_pdf(path)
        t1 = time.perf_counter()
        chunks = chunk_paper(path.stem, parsed, library.embedder.tokenizer, library.chunking)
        t2 = time.perf_counter()
        library.embedder.encode_documents([f"{c.section}. {c.text}" for c in chunks])
        t3 = time.perf_counter()
        for key, value in (("parse", t1 - t0), ("chunk", t2 - t1), ("embed", t3 - t2), ("total", t3 - t0)):
            best[key] = min(best.get(key, float("inf")), value)
    start = time.perf_counter()
    result = library.add_pdf(path)
    add_seconds = time.perf_counter() - start
    return {
        "paper": path.name, "pages": parsed.n_pages, "chunks": len(chunks),
        **{f"{k}_s": round(v, 3) for k, v in best.items()},
        "pages_per_s": round(parsed.n_pages / best["total"], 2),
        "chunks_per_s": round(len(chunks) / best["total"], 2),
        "library_add_s": round(add_seconds, 3), "added": result.added,
    }


@click.command(help="Measure ingest speed (parse + chunk + embed) on a folder of PDFs.")
@click.option("--papers", "papers_dir", type=click.Path(path_type=Path), default=DEFAULT_PAPERS, show_default=True)
@click.option("--repeats", default=3, show_default=True, help="Runs per paper; the best is reported.")
@click.option("--json", "as_json", is_flag=True)
def main(papers_dir: Path, repeats: int, as_json: bool) -> None:
    pdfs = sorted(papers_dir.glob("*.pdf"))
    if not pdfs:
        raise click.UsageError(f"no PDFs in {papers_dir}")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp))
        apply_offline_defaults(settings)
        start = time.perf_counter()
        library = Library.open(settings)
        library.embedder  # noqa: B018 - load the model now, to time it apart
        load_s = time.perf_counter() - start
        rows = [bench_paper(p, library, repeats) for p in pdfs]
        library.store.close()
    total_pages = sum(r["pages"] for r in rows)
    total_s = sum(r["total_s"] for r in rows)
    summary = {"cpu_count": os.cpu_count(), "model_load_s": round(load_s, 2), "papers": rows,
               "pages_per_s": round(total_pages / total_s, 2),
               "chunks_per_s": round(sum(r["chunks"] for r in rows) / total_s, 2),
               "seconds_per_10_pages": round(10 * total_s / total_pages, 2)}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"model load (once): {summary['model_load_s']} s on {summary['cpu_count']} CPUs")
    click.echo("| paper | pages | chunks | parse s | chunk s | embed s | total s | pages/s | chunks/s | library add s |")
    click.echo("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        click.echo(f"| {r['paper']} | {r['pages']} | {r['chunks']} | {r['parse_s']} | {r['chunk_s']} | "
                   f"{r['embed_s']} | {r['total_s']} | {r['pages_per_s']} | {r['chunks_per_s']} | "
                   f"{r['library_add_s']} |")
    click.echo(f"overall: {summary['pages_per_s']} pages/s, {summary['chunks_per_s']} chunks/s, "
               f"{summary['seconds_per_10_pages']} s per 10 pages")


if __name__ == "__main__":
    main()
