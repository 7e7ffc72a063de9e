"""``python -m copilot doctor``: is this instance able to work? One line per check, offline.

Each check returns what it measured (dimension, tokens/s, …) so a user can tell a slow machine from a broken
one. A failing check does not stop the others: the user sees everything that is wrong at once.

Two checks look at the data directory itself: ``index`` compares each vector index with the database (the rows,
their vectors and their filter metadata), and ``files`` finds what no read uses: stored PDFs no paper names
(left by a killed add or removal), staged uploads of processes that are gone, index snapshots and deltas of old
generations and temporary files of killed index saves. With ``repair`` an inconsistent index is rebuilt from the
database and those files are removed; the line says how many, and how large.

The storage checks import the storage package (and with it faiss) inside the check, so an install whose faiss
cannot load fails those lines and still reports the others.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from copilot import prompts
from copilot.config import Settings
from copilot.embeddings import get_embedder
from copilot.llm import get_llm

if TYPE_CHECKING:
    from copilot.library import Library
    from copilot.storage import Store


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def check_data_dir(settings: Settings) -> CheckResult:
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-", delete=True) as handle:
        handle.write(b"ok")
        handle.flush()
        os.fsync(handle.fileno())
    return CheckResult("data_dir", True, f"{data_dir.resolve()} is writable", {"path": str(data_dir.resolve())})


def check_embedder(settings: Settings) -> CheckResult:
    embedder = get_embedder(settings)
    vectors = embedder.encode_documents(["Transformers for citation recommendation.", "A recipe for bread."])
    norms = np.linalg.norm(vectors, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-3):
        return CheckResult("embedder", False, f"vectors are not unit length (norms {norms.tolist()})")
    return CheckResult(
        "embedder",
        True,
        f"{embedder.name} loaded from local files, dimension {embedder.dimension}",
        {"dimension": embedder.dimension, "model": embedder.name, "path": str(embedder.model_path),
         "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE", "")},
    )


def check_llm(settings: Settings) -> CheckResult:
    llm = get_llm(settings)
    start = time.perf_counter()
    pieces = list(llm.stream([{"role": "user", "content": prompts.DOCTOR_PROBE}], max_tokens=64, temperature=0.0))
    elapsed = time.perf_counter() - start
    text = "".join(pieces)
    tokens = llm.count_tokens(text)
    if not text.strip():
        return CheckResult("llm", False, f"{llm.describe()} returned no text")
    rate = tokens / elapsed if elapsed > 0 else 0.0
    licence = f", licence: {llm.licence}" if llm.licence else ""
    return CheckResult(
        "llm",
        True,
        f"{llm.describe()}{licence}, generated {tokens} tokens at {rate:.1f} tokens/s",
        {"backend": settings.resolved_backend(), "model": llm.describe(), "licence": llm.licence, "tokens": tokens,
         "tokens_per_s": round(rate, 2), "sample": text[:80]},
    )


def check_faiss(settings: Settings) -> CheckResult:
    from copilot.storage.vectors import IndexLog, VectorIndex

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(64, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex.build(32, np.arange(100, 164), vectors)
    with tempfile.TemporaryDirectory() as tmp:
        IndexLog(Path(tmp), "probe").write_snapshot(index, 1)
        loaded = IndexLog(Path(tmp), "probe").load(1)
    hits = loaded.search(vectors[7], 1) if loaded is not None else []
    ok = bool(hits) and hits[0][0] == 107 and abs(hits[0][1] - 1.0) < 1e-4
    import faiss

    return CheckResult("faiss", ok, f"faiss {faiss.__version__}: snapshot, load and exact search "
                       + ("work" if ok else "gave a wrong result"), {"version": faiss.__version__})


def check_sqlite(settings: Settings) -> CheckResult:
    from copilot.storage import Store, StorageError

    try:
        store = Store.open(settings)
    except StorageError as exc:
        return CheckResult("sqlite", False, str(exc), {"unusable": str(settings.db_path)})
    with store:
        ok = store.integrity_ok() and store.journal_mode.lower() == "wal"
        version = store.schema_version
        mode = store.journal_mode
    return CheckResult(
        "sqlite", ok, f"{settings.db_path} schema version {version}, journal {mode}, integrity "
        + ("ok" if ok else "FAILED"), {"backend": "sqlite", "schema_version": version, "journal_mode": mode},
    )


def _library(settings: Settings) -> Library | None:
    """The data directory's library without models, or None when its database cannot be used (``sqlite`` says
    why)."""
    from copilot.library import Library
    from copilot.storage import Store
    from copilot.storage import StorageError

    try:
        return Library.open(settings)
    except StorageError:
        return None


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 100_000 else f"{n_bytes / 1e3:.1f} kB"


def check_index(settings: Settings, repair: bool = False) -> CheckResult:
    library = _library(settings)
    if library is None:
        return CheckResult("index", False, "not checked: the database cannot be used (see sqlite)")
    with library.store as store:
        consistent = store.check_consistency()
        wrong = [kind for kind, ok in consistent.items() if not ok]
        rebuilt = store.reindex(wrong) if repair and wrong else {}
        counts = {kind: len(store.index(kind) or []) for kind in consistent}
    parts = [f"{kind} {counts[kind]} vectors " + ("rebuilt" if kind in rebuilt else "ok" if ok else "DIFFERS")
             for kind, ok in consistent.items()]
    ok = not wrong or bool(rebuilt)
    hint = "" if ok else "; `python -m copilot doctor --repair` rebuilds it from the database"
    return CheckResult("index", ok, "index matches the database: " + ", ".join(parts) + hint,
                       {"consistent": consistent, "rebuilt": sorted(rebuilt), "vectors": counts})


def check_files(settings: Settings, repair: bool = False) -> CheckResult:
    library = _library(settings)
    if library is None:
        return CheckResult("files", False, "not checked: the database cannot be used (see sqlite)")
    with library.store as store:
        found = {"orphan_pdfs": library.orphan_files(remove=repair),
                 "stale_index_files": store.stale_index_files(remove=repair)}
    data = {kind: [{"path": str(path), "bytes": size} for path, size in files] for kind, files in found.items()}
    n_files = sum(len(files) for files in found.values())
    n_bytes = sum(size for files in found.values() for _, size in files)
    if not n_files:
        return CheckResult("files", True, "no orphan files", data)
    what = ", ".join(f"{len(files)} {kind.replace('_', ' ')}" for kind, files in found.items() if files)
    if repair:
        return CheckResult("files", True, f"removed {n_files} orphan files ({what}), {_size(n_bytes)}",
                           data | {"removed": True})
    return CheckResult("files", False, f"{n_files} orphan files ({what}), {_size(n_bytes)}: "
                       "`python -m copilot doctor --repair` removes them", data)


def unsupported_thoughts(store: Store) -> list[tuple[int, list[str]]]:
    """The unflagged thoughts that state a fact (a number, a name, an acronym expansion, a quoted term) none of
    the chunks and thoughts they were built from states: (thought id, the missing facts). Thoughts written before
    answers were checked for facts may hold such errors; no model is loaded for this."""
    from copilot.grounding import SourceFacts, missing_facts

    out = []
    for thought in store.thoughts.list(None):
        if thought.flagged:
            continue
        edges = store.thoughts.sources(thought.id)
        chunks = [c.text for c in store.chunks.get_many([e.id for e in edges if e.kind == "chunk"])]
        thoughts = [t.text for t in store.thoughts.get_many([e.id for e in edges if e.kind == "thought"])]
        titles = [c.paper_title or "" for c in store.chunks.get_many([e.id for e in edges if e.kind == "chunk"])]
        missing = missing_facts(thought.text, SourceFacts([*chunks, *thoughts, *titles]))
        if missing:
            out.append((thought.id, missing))
    return out


def check_thoughts(settings: Settings, repair: bool = False) -> CheckResult:
    """Every thought's facts against its sources; ``repair`` flags the thoughts that fail (never retrieved again)."""
    from copilot.storage import Store, StorageError

    try:
        store = Store.open(settings)
    except StorageError:
        return CheckResult("thoughts", False, "not checked: the database cannot be used")
    with store:
        failing = unsupported_thoughts(store)
        flagged = store.thoughts.flag([t for t, _ in failing]) if repair and failing else 0
    data = {"unsupported": [{"id": t, "missing": m} for t, m in failing], "flagged": flagged}
    if not failing:
        return CheckResult("thoughts", True, "every thought's facts are in its sources", data)
    if repair:
        return CheckResult("thoughts", True, f"flagged {flagged} thoughts whose facts are not in their sources", data)
    return CheckResult("thoughts", False, f"{len(failing)} thoughts state facts their sources do not: "
                       "`python -m copilot doctor --repair` flags them", data)


def check_postgresql(settings: Settings) -> CheckResult:
    """The database ``COPILOT_DATABASE_URL`` names: reachable, migrated, its server and pgvector versions, and
    every stored vector searchable (named by host, never by the URL, which may hold a password)."""
    from copilot.storage import Store

    with Store.open(settings) as store:
        consistent = store.check_consistency()
        ok = store.integrity_ok() and all(consistent.values())
        data = {"backend": store.backend, "host": store.where, "server_version": store.server_version,
                "pgvector_version": store.pgvector_version, "schema_version": store.schema_version,
                "iterative_scan": store.iterative_scan}
    broken = [kind for kind, good in consistent.items() if not good]
    return CheckResult(
        "postgresql", ok, f"{data['host']}: PostgreSQL {data['server_version']}, pgvector {data['pgvector_version']}, "
        f"schema version {data['schema_version']}, vectors "
        + ("searchable" if not broken else f"NOT searchable in {', '.join(broken)}"), data,
    )


# The checks that can also mend what they find.
REPAIRS = {check_index, check_files, check_thoughts}


def checks_for(settings: Settings) -> list[Callable[..., CheckResult]]:
    """The checks of this configuration, in the order they are shown: the embedded backend also has its index
    files and stored PDFs checked against the database; a database server is checked by its own check, which also
    reports a URL whose scheme no backend serves."""
    storage = ([check_sqlite, check_files, check_index] if settings.storage_backend == "sqlite"
               else [check_postgresql])
    return [check_data_dir, *storage, check_thoughts, check_faiss, check_embedder, check_llm]


def run_checks(settings: Settings, checks: list[Callable[..., CheckResult]] | None = None, *,
               repair: bool = False) -> list[CheckResult]:
    """Run every check, turning an exception into a failed result with its message; ``repair`` lets the checks
    that can mend what they find do it."""
    results = []
    for check in checks or checks_for(settings):
        name = check.__name__.removeprefix("check_")
        start = time.perf_counter()
        try:
            result = check(settings, repair=True) if repair and check in REPAIRS else check(settings)
        except Exception as exc:  # noqa: BLE001 - a doctor reports every failure
            last = traceback.extract_tb(exc.__traceback__)[-1]
            result = CheckResult(name, False, f"{type(exc).__name__}: {exc}",
                                 {"where": f"{Path(last.filename).name}:{last.lineno}"})
        result.seconds = round(time.perf_counter() - start, 3)
        results.append(result)
    return results


def as_json(results: list[CheckResult]) -> dict[str, Any]:
    return {"ok": all(r.ok for r in results), "checks": [asdict(r) for r in results]}


def format_lines(results: list[CheckResult]) -> list[str]:
    return [f"{'ok  ' if r.ok else 'FAIL'} {r.name:<9} {r.detail} ({r.seconds:.2f}s)" for r in results]
