"""How retrieval and writes scale with the library: ``python -m copilot.bench scale --sizes 10000,100000``.

For each size it builds a real data directory through the product's own storage layer, laid out as a public
demo is: shared arXiv papers of 70 chunks, plus uploads of ten other users (two papers each) and of the asking
user (one), and thoughts of several users. Vectors are realistic (see :mod:`copilot.bench.corpus`). Then:

- ``open_s``, ``rss_mb``, ``retrieve_*``, ``recall_at_10`` are measured in a fresh process, as the app would
  start: open the store, answer the first question (``open_s``, cold start), then 200 real questions through
  the chat's own retrieval (``retrieve_mixture`` and ``pack_context``: chunks and thoughts, scoped to what the
  asker may see), after 20 other questions as a warm-up. The page cache is warm (the library was just built). ``recall_at_10`` compares the scoped chunk search with exact search over the same scope.
  ``rss_mb`` is that process's peak resident memory.
- ``rebuild_p50_ms``: the Arxiv-Copilot way, a flat index built over every chunk vector (held in memory) for
  each question, then searched, in the same run.
- ``insert_thought_p50_ms`` (one thought with its provenance) and ``insert_paper_p50_ms`` (one 70-chunk paper),
  each a whole committed write, index and delta included.
- ``index_mb`` (the chunk index in memory: vectors, graph, metadata) against ``raw_mb`` (the vectors alone).

``--backend postgres`` measures the same on PostgreSQL with pgvector (``--database-url``, else
``COPILOT_DATABASE_URL``, else a server of the ``pgserver`` package started for the run): each size in a schema of
its own, dropped afterwards, the library loaded in bulk (its HNSW index built once at the end, as a copy into the
database would). There ``index_mb`` is the HNSW index on disk and ``rss_mb`` the app process alone (the server's
memory is not in it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import faiss
import numpy as np

from copilot.bench import corpus
from copilot.retrieval import CANDIDATE_FACTOR, chunk_scope, pack_context, retrieve_mixture
from copilot.storage import Store, utc_now
from copilot.storage.vectors import IndexOptions
from copilot.types import Chunk, Paper, ThoughtSource

if TYPE_CHECKING:
    from copilot.storage.postgres import PostgresStore

Log = Callable[[str], None]

CHUNKS_PER_PAPER = 70
OTHER_USERS = 10
UPLOADS_EACH = 2
ASKER = "asker"
K = 8
PAPERS_PER_WRITE = 100


@dataclass
class Built:
    """What the build knows that the measurements need: every chunk vector and which the asker may see."""

    ids: np.ndarray
    vectors: np.ndarray
    in_scope: np.ndarray  # bool per chunk


URL_VARIABLE = "COPILOT_BENCH_DATABASE_URL"  # how the measuring process is told the database (not in its argv)


def open_store(work: Path, options: IndexOptions, url: str = "") -> Store | PostgresStore:
    """The store a run measures: the data directory ``work`` (embedded), or the PostgreSQL database ``url``."""
    if url:
        # psycopg is loaded only for a PostgreSQL run: the embedded run's peak memory is measured without it.
        from copilot.storage.postgres import PostgresStore

        return PostgresStore(url, options)
    return Store(work / "copilot.db", work / "index", options)


@contextmanager
def bench_server(work_root: Path | None) -> Iterator[str]:
    """A PostgreSQL with pgvector for the run (the ``pgserver`` package), stopped and removed afterwards."""
    try:  # a test requirement, not a runtime one
        import pgserver
    except ImportError:
        raise RuntimeError("--backend postgres needs --database-url (or COPILOT_DATABASE_URL), or the pgserver "
                           "package (requirements-test.txt) to start a server for the run") from None
    folder = Path(tempfile.mkdtemp(prefix="scale-pg-", dir=work_root))
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3)


def _paper(paper_id: str, owner: str | None) -> Paper:
    return Paper(id=paper_id, user_id=owner, source="upload" if owner else "arxiv", title=f"Paper {paper_id}",
                 added_at=utc_now())


def _chunks(paper_id: str, texts: list[str]) -> list[Chunk]:
    return [Chunk(paper_id=paper_id, seq=i, section="Body", text=text, page_start=1, page_end=1, char_start=0,
                  char_end=len(text), n_tokens=max(1, len(text) // 4)) for i, text in enumerate(texts)]


def build(work: Path, n: int, base: np.ndarray, texts: list[str], options: IndexOptions, seed: int = 0,
          url: str = "") -> Built:
    """A library of ``n`` chunks in ``work`` (or the database ``url``): mostly shared papers, some uploads, some
    thoughts."""
    n_papers = max(-(-n // CHUNKS_PER_PAPER), OTHER_USERS * UPLOADS_EACH + 2)
    sizes = [CHUNKS_PER_PAPER] * n_papers
    sizes[-1] = n - CHUNKS_PER_PAPER * (n_papers - 1)  # every paper has 70 chunks but the last: n exactly
    rng = np.random.default_rng(seed)
    owners: list[str | None] = [None] * n_papers
    uploads = rng.choice(n_papers, OTHER_USERS * UPLOADS_EACH + 1, replace=False)
    for i, paper in enumerate(uploads[:-1]):
        owners[paper] = f"user{i % OTHER_USERS}"
    owners[uploads[-1]] = ASKER
    neighbours = corpus.nearest_neighbours(base)
    all_ids, all_vectors, scope = [], [], []
    store = open_store(work, options, url)
    stream = corpus.derived(base, neighbours, n_papers * CHUNKS_PER_PAPER, seed=seed,
                            batch=PAPERS_PER_WRITE * CHUNKS_PER_PAPER)
    try:
        with store.bulk_load() if url else nullcontext():  # on PostgreSQL the graph is built once, at the end
            for start, (origin, vectors) in zip(range(0, n_papers, PAPERS_PER_WRITE), stream, strict=False):
                batch = range(start, min(start + PAPERS_PER_WRITE, n_papers))
                papers = [_paper(f"p{j}", owners[j]) for j in batch]
                offsets = np.cumsum([0] + [sizes[j] for j in batch])
                chunks = [c for j, p, a, b in zip(batch, papers, offsets, offsets[1:], strict=False)
                          for c in _chunks(p.id, [texts[o] for o in origin[a:b]])]
                vectors = vectors[: len(chunks)]
                with store.transaction():
                    store.papers.add_many(papers)
                    ids = store.chunks.add(chunks, vectors)
                all_ids.append(np.asarray(ids))
                all_vectors.append(vectors)
                scope.append(np.repeat([owners[j] in (None, ASKER) for j in batch], [sizes[j] for j in batch]))
            # Thoughts: the asker's, other users' and a few public ones, grown from the same real texts.
            _, thought_vectors = next(corpus.derived(base, neighbours, 300, seed=seed + 1))
            for i, vector in enumerate(thought_vectors):
                owner = ASKER if i < 60 else f"user{i % OTHER_USERS}"
                store.thoughts.add(user_id=owner, text=texts[i % len(texts)], confidence=0.8, depth=1,
                                   public=i % 25 == 0, vector=vector, sources=[])
    finally:
        store.close()
    return Built(np.concatenate(all_ids), np.concatenate(all_vectors), np.concatenate(scope))


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def exact_top(built: Built, queries: np.ndarray, k: int = 10) -> list[list[int]]:
    """The true scoped top ``k`` of each query: every in-scope chunk scored."""
    vectors, ids = built.vectors[built.in_scope], built.ids[built.in_scope]
    tops = []
    for query in queries:
        scores = vectors @ query
        top = np.argpartition(-scores, k)[:k]
        tops.append(ids[top[np.argsort(-scores[top])]].tolist())
    return tops


def probe(work: Path, queries_path: Path, options: IndexOptions) -> dict:
    """Run in a fresh process: cold start, retrieval latency and recall, peak memory."""
    saved = np.load(queries_path)
    queries, truth, warm_up = saved["queries"], saved["truth"], saved["warm_up"]
    started = time.perf_counter()
    store = open_store(work, options, os.environ.get(URL_VARIABLE, ""))
    retrieve_mixture(store, warm_up[0], user_id=ASKER, k=K)
    open_s = time.perf_counter() - started
    for query in warm_up[1:]:  # other questions than the measured ones: no measured hit is cached by them
        pack_context(retrieve_mixture(store, query, user_id=ASKER, k=K), k=K)
    timings = []
    for query in queries:
        t0 = time.perf_counter()
        candidates = retrieve_mixture(store, query, user_id=ASKER, k=K)
        pack_context(candidates, k=K)
        timings.append((time.perf_counter() - t0) * 1000)
    recalls = []
    for query, expected in zip(queries, truth, strict=True):
        found = [i for i, _ in store.search("chunks", query, 10, chunk_scope(ASKER))]
        recalls.append(len(set(found) & set(expected.tolist())) / 10)
    result = {"open_s": round(open_s, 3), "retrieve_p50_ms": _percentile(timings, 50),
              "retrieve_p99_ms": _percentile(timings, 99), "recall_at_10": round(float(np.mean(recalls)), 4),
              "index_mb": round(store.index_bytes("chunks") / 1e6, 1), "rss_mb": peak_rss_mb()}
    store.close()
    return result


def measure_writes(work: Path, options: IndexOptions, base: np.ndarray, texts: list[str], repeats: int = 30,
                   url: str = "") -> dict:
    store = open_store(work, options, url)
    if not url:
        store.index("chunks"), store.index("thoughts")  # loaded before timing, as in a running app
    neighbours = corpus.nearest_neighbours(base[:2000])
    _, vectors = next(corpus.derived(base[:2000], neighbours, repeats + 5 * CHUNKS_PER_PAPER, seed=99))
    source = int(store.chunks.ids_of("p0")[0])
    thought_ms = []
    for i in range(repeats):
        t0 = time.perf_counter()
        store.thoughts.add(user_id=ASKER, text=texts[i], confidence=0.8, depth=1, public=False,
                           vector=vectors[i], sources=[ThoughtSource("chunk", source)])
        thought_ms.append((time.perf_counter() - t0) * 1000)
    paper_ms = []
    for i in range(5):
        rows = vectors[repeats + i * CHUNKS_PER_PAPER: repeats + (i + 1) * CHUNKS_PER_PAPER]
        paper = _paper(f"timed{i}", None)
        chunks = _chunks(paper.id, texts[:CHUNKS_PER_PAPER])
        t0 = time.perf_counter()
        with store.transaction():
            store.papers.add_many([paper])
            store.chunks.add(chunks, rows)
        paper_ms.append((time.perf_counter() - t0) * 1000)
    store.close()
    return {"insert_thought_p50_ms": _percentile(thought_ms, 50), "insert_paper_p50_ms": _percentile(paper_ms, 50)}


def measure_rebuild(built: Built, queries: np.ndarray, repeats: int) -> float:
    """The per-query flat rebuild: index every chunk vector, then search, for each question."""
    timings = []
    for query in queries[:repeats]:
        t0 = time.perf_counter()
        flat = faiss.IndexFlatIP(built.vectors.shape[1])
        flat.add(built.vectors)
        flat.search(query.reshape(1, -1), CANDIDATE_FACTOR * K)
        timings.append((time.perf_counter() - t0) * 1000)
    return _percentile(timings, 50)


def run_size(n: int, base: np.ndarray, texts: list[str], queries: np.ndarray, warm_up: np.ndarray,
             options: IndexOptions, work_root: Path | None, log: Log, database_url: str = "") -> dict:
    """Build a library of ``n`` chunks and measure it (on PostgreSQL when ``database_url`` is given)."""
    from copilot.storage.postgres import scratch_schema  # psycopg only for a PostgreSQL run, as in open_store

    with scratch_schema(database_url, f"scale_{n}") if database_url else nullcontext("") as url:
        return _run_size(n, base, texts, queries, warm_up, options, work_root, log, url)


def _run_size(n: int, base: np.ndarray, texts: list[str], queries: np.ndarray, warm_up: np.ndarray,
              options: IndexOptions, work_root: Path | None, log: Log, url: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"scale-{n}-", dir=work_root))
    try:
        t0 = time.perf_counter()
        built = build(work, n, base, texts, options, url=url)
        log(f"n={n}: built {len(built.ids)} chunks in {time.perf_counter() - t0:.0f} s")
        queries_path = work / "queries.npz"
        np.savez(queries_path, queries=queries, truth=np.array(exact_top(built, queries)), warm_up=warm_up)
        child = subprocess.run(
            [sys.executable, "-m", "copilot.bench", "probe", "--work", str(work), "--queries", str(queries_path),
             "--options", json.dumps(options.__dict__)], capture_output=True, text=True,
            env=os.environ | {URL_VARIABLE: url})
        if child.returncode != 0:
            raise RuntimeError(f"the measuring process failed: {child.stderr.strip()[-2000:]}")
        probed = json.loads(child.stdout)
        log(f"n={n}: probed {probed}")
        rebuild = measure_rebuild(built, queries, repeats=5 if n >= 500_000 else 20)
        writes = measure_writes(work, options, base, texts, url=url)
        return {"backend": "postgres" if url else "sqlite", "n": int(len(built.ids)),
                "retrieve_p50_ms": probed["retrieve_p50_ms"],
                "retrieve_p99_ms": probed["retrieve_p99_ms"], "rebuild_p50_ms": rebuild,
                "insert_thought_p50_ms": writes["insert_thought_p50_ms"],
                "insert_paper_p50_ms": writes["insert_paper_p50_ms"], "open_s": probed["open_s"],
                "rss_mb": probed["rss_mb"], "recall_at_10": probed["recall_at_10"], "index_mb": probed["index_mb"],
                "raw_mb": round(built.vectors.nbytes / 1e6, 1)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def markdown(rows: list[dict]) -> str:
    head = ("| chunks | scoped retrieval p50 / p99 | per-query flat rebuild p50 | speed-up | recall@10 | "
            "one thought | one 70-chunk paper | cold start | peak RSS | index / raw vectors |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['n']:,} | {r['retrieve_p50_ms']} / {r['retrieve_p99_ms']} ms | {r['rebuild_p50_ms']} ms | "
            f"{r['rebuild_p50_ms'] / max(r['retrieve_p50_ms'], 1e-6):.0f}× | {r['recall_at_10']} | "
            f"{r['insert_thought_p50_ms']} ms | {r['insert_paper_p50_ms']} ms | {r['open_s']} s | "
            f"{r['rss_mb']:,.0f} MB | {r['index_mb']:,.0f} / {r['raw_mb']:,.0f} MB |")
    return "\n".join(lines)
