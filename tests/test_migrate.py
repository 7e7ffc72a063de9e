"""``python -m copilot migrate --to postgresql://…``: an embedded instance with real content (two shared papers
added through the library, thoughts with provenance, memories, queries with feedback, a profile, follows, a
refresh, an eval run, usage) is copied into PostgreSQL with its ids, checked, copied again without a duplicate,
and a row written on PostgreSQL afterwards gets a fresh id."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from copilot.cli import cli
from copilot.config import Settings
from copilot.storage import Store
from copilot.storage.copy import NOT_COPIED, TABLES
from copilot.types import ThoughtSource, VectorFilter
from copilot.library import Library
from tests.conftest import TEST_DATA, all_rows, count_rows
from tests.library_support import HashEmbedder

PAPERS = ("N18-3011.pdf", "2020.acl-main.207.pdf")


def build_instance(data_dir: Path) -> dict[str, object]:
    """An embedded instance with a record in every table; returns what the test looks up afterwards."""
    embedder = HashEmbedder()
    store = Store(data_dir / "copilot.db", data_dir / "index")
    library = Library(store, data_dir / "pdfs", embedder=embedder)
    ada = library.add_pdf(TEST_DATA / "papers" / PAPERS[0], user_id="ada").paper_id
    bob = library.add_pdf(TEST_DATA / "papers" / PAPERS[1], user_id="bob").paper_id
    chunks = store.chunks.ids_of(ada)
    first = store.thoughts.add(user_id="ada", text="Citation graphs link papers to their references.",
                               confidence=0.8, depth=1, public=False,
                               vector=embedder.encode_query("citation graphs link papers"),
                               sources=[ThoughtSource("chunk", chunks[0]), ThoughtSource("chunk", chunks[1])])
    gone = store.thoughts.add(user_id="ada", text="A thought deleted before the copy.", confidence=0.5, depth=1,
                              public=False, vector=embedder.encode_query("deleted"), sources=[])
    second = store.thoughts.add(user_id="bob", text="SPECTER embeds papers from their citations.", confidence=0.9,
                                depth=2, public=True, vector=embedder.encode_query("specter citations embed"),
                                sources=[ThoughtSource("thought", first),
                                         ThoughtSource("chunk", store.chunks.ids_of(bob)[0])])
    store.thoughts.delete(gone)  # an id gap: the copy keeps ids, it does not renumber
    for i in range(12):
        store.memories.add("ada", f"I review for venue number {i}.", embedder.encode_query(f"review venue {i}"))
    query = store.queries.add("ada", "How are citation graphs built?", "From references.", [{"kind": "chunk",
                              "id": chunks[0]}], {"answer": 1.0})
    store.queries.record_outcome(query, thought_id=first, outcome="added", reason="new", timings={"answer": 1.0},
                                 llm_calls=2)
    store.queries.add_feedback(query, "ada", 1)
    store.profiles.save("ada", "I study scholarly document processing.", "typed")
    store.follows.replace("ada", ["cs.DL", "cs.CL"])
    store.refreshes.add(user_id="ada", categories=["cs.DL"], added=[], skipped=2, errors=[],
                        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:05+00:00")
    store.eval_runs.add(task="claims", methods=["rag"], started_at="s", finished_at="f", path="runs/1",
                        report={"f1": 0.5})
    store.usage.record("ada", "ask", 3)
    store.close()
    return {"ada": ada, "bob": bob, "first": first, "second": second, "query": query}


def migrate(data_dir: Path, url: str, *extra: str):  # noqa: ANN201 - a click Result
    return CliRunner().invoke(cli, ["migrate", "--to", url, "--data-dir", str(data_dir), *extra])


def test_every_record_table_is_copied(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db", tmp_path / "i") as store:
        names = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == set(TABLES) | set(NOT_COPIED)


def test_migrate_round_trip(pg_url: str, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = build_instance(data_dir)
    result = migrate(data_dir, pg_url, "--batch", "7")
    assert result.exit_code == 0, result.output
    verdict = result.stdout.strip().splitlines()
    assert len(verdict) == 1 and verdict[0].startswith("copied and checked: "), result.output
    assert "memories: 7/12 rows" in result.stderr and "memories: 12/12 rows" in result.stderr

    with Store(data_dir / "copilot.db", data_dir / "index") as source, \
            Store.open(Settings(data_dir=tmp_path / "other", database_url=pg_url)) as target:
        assert target.backend == "postgresql"
        for table in TABLES:
            assert count_rows(target, table) == count_rows(source, table), table
        assert count_rows(target, "chunks") > 20 and count_rows(target, "thought_sources") == 4
        for table in ("papers", "queries", "feedback", "profiles", "eval_runs", "refreshes", "usage_events"):
            assert all_rows(target, table) == all_rows(source, table), table
        ids = source.embeddings("chunks")[0].tolist()

        def chunks(store):  # noqa: ANN001, ANN202
            return [(c.id, c.paper_id, c.seq, c.section, c.text, c.page_start, c.vector.tobytes())
                    for c in store.chunks.get_many(ids)]

        assert chunks(target) == chunks(source), "chunks arrive with their ids and unchanged vectors"
        assert target.thoughts.get(made["second"], sources=True) == source.thoughts.get(made["second"], sources=True)
        assert target.thoughts.papers_behind(made["second"]) == source.thoughts.papers_behind(made["second"])
        assert target.queries.get(made["query"]).thought_id == made["first"]
        assert target.queries.feedback("ada") == source.queries.feedback("ada")
        assert target.profiles.get("ada") == source.profiles.get("ada")
        assert target.follows.of("ada") == source.follows.of("ada") == ["cs.DL", "cs.CL"]
        assert [m.id for m in target.memories.list("ada")] == [m.id for m in source.memories.list("ada")]
        # Searches agree exactly on a library this small (both sides exact, or a graph that finds everything): the
        # same scores, and the same chunks wherever a score is not tied with another (two chunks with one vector
        # may come in either order, or either one at the cut).
        _, chunk_vectors = source.embeddings("chunks")
        for vector in chunk_vectors[::9]:
            for where in (VectorFilter(), VectorFilter(owner="ada"), VectorFilter(papers=frozenset([made["bob"]]))):
                got, want = target.search("chunks", vector, 10, where), source.search("chunks", vector, 10, where)
                assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
                scores = [s for _, s in want]
                untied = [k for k, s in enumerate(scores)
                          if sum(abs(s - o) <= 1e-4 for o in scores) == 1 and k < len(scores) - 1]
                assert [got[k][0] for k in untied] == [want[k][0] for k in untied]

    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:  # as if the first run had stopped half-way
        conn.execute("DELETE FROM memories WHERE id > 5")
    again = migrate(data_dir, pg_url, "--json")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    assert summary["ok"] and summary["retrievals"]["recall"] == 1.0 and summary["retrievals"]["searches"] >= 20
    assert all(t["present"] == t["source"] == t["target"] for t in summary["tables"]), "nothing was duplicated"
    assert "memories: 12/12 rows" in again.stderr, "what was missing is added"

    with Store.open(Settings(data_dir=tmp_path / "other", database_url=pg_url)) as target:
        assert count_rows(target, "thought_sources") == 4
        newest = max(r["id"] for r in all_rows(target, "memories"))
        fresh = target.memories.add("ada", "A memory written on PostgreSQL.", HashEmbedder().encode_query("new"))
        assert fresh > newest
        query = target.queries.add("bob", "q", "a", [], {})
        assert query > made["query"] and target.queries.add_feedback(query, "bob", 1) > 1
        target.follows.replace("bob", ["cs.IR"])
        assert target.follows.of("bob") == ["cs.IR"]


def test_an_unreachable_target_is_one_line_without_the_password(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    Store(data_dir / "copilot.db", data_dir / "index").close()
    result = migrate(data_dir, "postgresql://copilot:s3cret-pw@127.0.0.1:1/copilot")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot connect to the PostgreSQL database at 127.0.0.1:1")
    assert "s3cret-pw" not in result.output


def test_a_data_dir_without_a_database_is_refused(tmp_path: Path) -> None:
    result = migrate(tmp_path / "empty", "postgresql://copilot@127.0.0.1:1/copilot")
    assert result.exit_code == 1 and result.stderr.startswith("error: no embedded database at ")
    assert not (tmp_path / "empty").exists(), "nothing is created in the data directory"


def test_a_copy_that_differs_fails_its_check_in_one_line(pg_url: str, tmp_path: Path) -> None:
    """A target row that differs from the source (here every chunk vector turned around) is kept by a second
    run, as rows already there are, and the check says so: one line, exit status 1."""
    import psycopg
    from pgvector.psycopg import register_vector

    data_dir = tmp_path / "data"
    build_instance(data_dir)
    assert migrate(data_dir, pg_url).exit_code == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        turned = [(-vector.to_numpy(), i) for i, vector in conn.execute("SELECT id, embedding FROM chunks")]
        conn.cursor().executemany("UPDATE chunks SET embedding = %s WHERE id = %s", turned)
    result = migrate(data_dir, pg_url)
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    found = re.search(r"failed its check: chunks searches: recall (\d\.\d{3}) of the source's top-10 ids", line)
    # turned around, the nearest become the farthest: a search over 20 chunks or fewer may still share an id or two
    assert line.startswith("error: the copy to ") and found and float(found[1]) < 0.05, line
    assert result.stderr.strip().splitlines()[-1] == line


@pytest.mark.slow
def test_migrate_a_library_of_the_real_embedder(real_library: tuple[Path, dict[str, str]], pg_url: str) -> None:
    """Two shared papers embedded by the bundled model (384 dimensions) copy and check the same way, and a
    question's embedding finds the same chunks on both stores."""
    from copilot.embeddings import get_embedder

    data_dir, ids = real_library
    result = migrate(data_dir, pg_url, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ok"] and summary["retrievals"]["recall_by_table"]["chunks"] == 1.0
    settings = Settings(data_dir=data_dir)
    query = get_embedder(settings).encode_query("How is SPECTER trained?")
    with Store(settings.db_path, settings.index_dir) as source, \
            Store.open(Settings(data_dir=data_dir, database_url=pg_url)) as target:
        assert target.chunks.vectors(target.chunks.ids_of(ids["specter"])[:1]).shape == (1, 384)
        for where in (VectorFilter(), VectorFilter(papers=frozenset([ids["litgraph"]]))):
            assert [i for i, _ in target.search("chunks", query, 10, where)] == \
                   [i for i, _ in source.search("chunks", query, 10, where)]


def test_vectors_of_another_model_are_refused_before_anything_is_copied(pg_url: str, tmp_path: Path) -> None:
    from copilot.storage.postgres import PostgresStore

    data_dir = tmp_path / "data"
    build_instance(data_dir)
    with PostgresStore(pg_url) as target:
        target.memories.add("eve", "I use another model.", np.ones(16, dtype=np.float32) / 4)
    result = migrate(data_dir, pg_url)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: memories vectors in ")
    assert "have 16 dimensions, the embedded instance's have 128" in result.stderr
    with PostgresStore(pg_url) as target:
        assert count_rows(target, "papers") == 0 and count_rows(target, "memories") == 1
