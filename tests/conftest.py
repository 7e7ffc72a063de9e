"""Shared fixtures: isolated settings in a temporary data directory, the repo root, the test data (tests/data)."""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from copilot.config import DATA_ROOT, Settings

if TYPE_CHECKING:
    from ingest.models import ParsedPaper

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = DATA_ROOT

# Tests never reach a model hub: every model comes from an installed package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# Each test process (each worker), and the apps it starts, keep uploads in a folder of their own. Gradio files an
# upload under a hash of its bytes, so two apps on one machine given the same PDF at once share its path, and the
# first to add it and discard its copy removes the other's before that one is read.
os.environ["GRADIO_TEMP_DIR"] = tempfile.mkdtemp(prefix="copilot-tests-uploads-")
atexit.register(shutil.rmtree, os.environ["GRADIO_TEMP_DIR"], ignore_errors=True)


@functools.cache
def parsed_paper(path: Path) -> ParsedPaper:
    """A test PDF parsed with the default options, once per session: the tests that only read a parse share it
    (and must not change it)."""
    from ingest.pdf import parse_pdf

    return parse_pdf(path)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on the embedded defaults, writing only under a temporary directory."""
    return Settings(data_dir=tmp_path / "data", llm_backend="local")


def clean_env() -> dict[str, str]:
    """The environment without any LLM configuration, so ``auto`` picks the embedded model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_") and k != "HF_TOKEN"}
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["GRADIO_ANALYTICS_ENABLED"] = "False"
    return env


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields the URL
    """The real app started with ``make run`` on the embedded defaults, on a free port.

    One instance per test module, each with an empty data directory: what one module asks (and the thoughts it
    leaves) must not shape another module's answers.
    """
    import signal
    import subprocess
    import time
    import urllib.request

    port = free_port()
    data_dir = tmp_path_factory.mktemp("app-data")
    log_path = data_dir.parent / "app.log"
    env = clean_env() | {"COPILOT_PORT": str(port), "COPILOT_DATA_DIR": str(data_dir)}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 300
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"make run exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not answer at {url}:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def llm():  # noqa: ANN201 - a tests.scripted_llm.ScriptedLLM
    """A scripted LLM with no replies yet; a test sets ``answers`` and ``thoughts`` as it needs."""
    from tests.scripted_llm import ScriptedLLM

    return ScriptedLLM()


@pytest.fixture(scope="session")
def real_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Two real shared papers in a data directory, embedded once per session (end-to-end tests only read it)."""
    from tests.library_support import build_real_library

    return build_real_library(tmp_path_factory)


# ----- storage backends ----------------------------------------------------------------------------------

BACKENDS = ("sqlite", "postgresql")
_SCHEMAS = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server():  # noqa: ANN201 - yields a pgserver.PostgresServer
    """A real PostgreSQL with pgvector (the ``pgserver`` package bundles both) on a temporary directory, started
    once per session, stopped and deleted at its end; it listens on a Unix socket in that directory only.

    The directory is a short one of its own (a socket path may not pass 107 bytes), outside pytest's numbered
    temporary folders, which another pytest run may clean up while this one still needs the server."""
    import tempfile
    import warnings

    with warnings.catch_warnings():  # it falls back to /tmp for its run-time files: what a test wants anyway
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="copilot-pg-")), cleanup_mode="delete")
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest):  # noqa: ANN201 - yields a URL
    """The URL of an empty schema of the session's PostgreSQL, dropped after the test: each test starts afresh."""
    from urllib.parse import quote

    server = request.getfixturevalue("pg_server")
    schema = f"t{next(_SCHEMAS)}"
    server.psql(f"CREATE SCHEMA {schema};")
    base = server.get_uri()
    yield f"{base}&options={quote(f'-csearch_path={schema},public')}"
    server.psql(f"SET client_min_messages = warning; DROP SCHEMA {schema} CASCADE;")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each storage backend in turn: the embedded SQLite + FAISS, and PostgreSQL + pgvector."""
    return request.param


@pytest.fixture
def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest):  # noqa: ANN201 - a factory
    """Opens the store of this test's ``backend``; every call opens the same data (as a restarted process)."""
    from copilot.storage import Store

    url = request.getfixturevalue("pg_url") if backend == "postgresql" else ""
    opened = []

    def open_(options=None):  # noqa: ANN001, ANN202 - IndexOptions or None
        if backend == "postgresql":
            from copilot.storage.postgres import PostgresStore

            store = PostgresStore(url, options)
        else:
            store = Store(tmp_path / "copilot.db", tmp_path / "index", options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def count_rows(store: Any, table: str) -> int:  # noqa: ANN401 - a store of either backend
    """How many rows ``table`` holds (the tests' own SQL, on either backend)."""
    return int(store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def all_rows(store: Any, table: str) -> list[dict[str, Any]]:  # noqa: ANN401
    """Every row of ``table`` as a dict, in id order when it has ids."""
    cursor = store.conn.execute(f"SELECT * FROM {table}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return sorted(rows, key=lambda r: r["id"]) if "id" in names else rows


def get_row(store: Any, table: str, row_id: Any) -> dict[str, Any] | None:  # noqa: ANN401
    """The row of ``table`` with this id, as a dict."""
    return next((r for r in all_rows(store, table) if r["id"] == row_id), None)


@pytest.fixture(scope="session")
def embedder():  # noqa: ANN201 - the product's Embedder
    """The real embedder (all-MiniLM-L6-v2 from its package), loaded once for the session."""
    from copilot.embeddings import get_embedder

    return get_embedder(Settings())


def add_chunks(store: Any, embedder: Any, papers: dict[str, str],  # noqa: ANN401 - a store of either backend
               chunks: list[tuple[str, str, str]]) -> None:
    """Store ``papers`` (id -> title) and ``chunks`` (paper id, section, text), one page each in order, with their
    embeddings."""
    from copilot.types import Paper

    for paper_id, title in papers.items():
        store.papers.add(Paper(paper_id, title=title))
    vectors = embedder.encode_documents([text for _, _, text in chunks])
    store.insert_with_vectors("chunks", [{"paper_id": p, "seq": i, "section": section, "text": text,
                                          "page_start": i + 1, "page_end": i + 1, "n_tokens": len(text.split())}
                                         for i, (p, section, text) in enumerate(chunks)], vectors)


@pytest.fixture
def store(open_store):  # noqa: ANN001, ANN201 - a Store or PostgresStore
    """A fresh store on each backend."""
    return open_store()
