from pathlib import Path

import numpy as np
import pytest

from copilot.storage.vectors import IndexLog, IndexOptions, VectorIndex, index_files
from copilot.types import VectorFilter, VectorMeta


def unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_search_returns_cosines_best_first() -> None:
    rng = np.random.default_rng(1)
    vectors = unit(rng, 50)
    index = VectorIndex.build(16, np.arange(1000, 1050), vectors)
    hits = index.search(vectors[3], 5)
    assert hits[0][0] == 1003
    assert abs(hits[0][1] - 1.0) < 1e-5
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    expected = sorted(((float(vectors[i] @ vectors[3]), 1000 + i) for i in range(50)), reverse=True)[:5]
    assert [i for _, i in expected] == [i for i, _ in hits]


def test_a_filter_restricts_the_search() -> None:
    rng = np.random.default_rng(2)
    vectors = unit(rng, 20)
    metas = [VectorMeta(paper="p1" if i in (5, 6, 7) else "p2") for i in range(20)]
    index = VectorIndex.build(16, np.arange(20), vectors, metas)
    hits = index.search(vectors[0], 5, VectorFilter(papers=frozenset({"p1"})))
    assert {i for i, _ in hits} == {5, 6, 7}
    assert index.search(vectors[0], 5, VectorFilter(papers=frozenset())) == []
    assert index.search(vectors[0], 5, VectorFilter(papers=frozenset({"unknown"}))) == []


def test_remove_and_ids() -> None:
    rng = np.random.default_rng(3)
    index = VectorIndex.build(16, np.array([4, 8, 15]), unit(rng, 3))
    assert index.remove([8]) == 1
    assert sorted(index.ids().tolist()) == [4, 15]
    assert len(index) == 2


def brute_force(vectors: np.ndarray, metas: list[VectorMeta], alive: set[int], query: np.ndarray, k: int,
                where: VectorFilter) -> list[int]:
    """The filter's meaning, written out: the same terms as the SQL WHERE in copilot.storage.store.filter_sql."""
    def allowed(m: VectorMeta) -> bool:
        if where.scoped_by_owner and not ((where.owner is not None and m.owner == where.owner)
                                          or (where.shared and m.owner is None) or (where.public and m.public)):
            return False
        if where.papers is not None and m.paper not in where.papers:
            return False
        if where.min_confidence is not None and (m.confidence is None or m.confidence < where.min_confidence):
            return False
        return not (where.unflagged and m.flagged)
    scored = sorted(((float(vectors[i] @ query), i) for i in alive if allowed(metas[i])), reverse=True)
    return [i for _, i in scored[:k]]


FILTERS = [
    VectorFilter(),
    VectorFilter(owner="a"),
    VectorFilter(owner="a", shared=True),
    VectorFilter(owner="b", public=True, min_confidence=0.5, unflagged=True),
    VectorFilter(owner="c", shared=True, papers=frozenset({"p0", "p3"})),
    VectorFilter(shared=True),
    VectorFilter(public=True),
    VectorFilter(papers=frozenset({"p1"})),
    VectorFilter(owner="nobody"),
]


@pytest.mark.parametrize("threshold", [10_000, 50])  # exact partitions only; the shared one as HNSW
def test_every_filter_means_what_the_sql_means(threshold: int) -> None:
    rng = np.random.default_rng(7)
    n = 600
    vectors = unit(rng, n)
    owners = [None, None, None, "a", "b", "c"]
    metas = [VectorMeta(owner=owners[i % 6], paper=f"p{i % 5}", public=(i % 6 >= 3 and i % 7 == 0),
                        confidence=float(rng.random()), flagged=bool(i % 11 == 0)) for i in range(n)]
    index = VectorIndex.build(16, np.arange(n), vectors, metas,
                              IndexOptions(hnsw_threshold=threshold, ef_search=400))
    alive = set(range(n))
    removed = list(range(0, n, 9))
    index.delete(removed)
    alive -= set(removed)
    # metadata changes, including ones that move a row between partitions (public on, owner change)
    changes = {10: VectorMeta(owner="a", paper="p0", public=True, confidence=0.9),
               11: VectorMeta(owner="b", paper="p3", confidence=0.1, flagged=True),
               13: VectorMeta(owner=None, paper="p1")}
    index.set_meta(list(changes), list(changes.values()))
    metas = [changes.get(i, m) for i, m in enumerate(metas)]
    assert index.partitions["shared"].hnsw == (threshold == 50)
    for where in FILTERS:
        for q in range(5):
            query = vectors[q * 37]
            hits = index.search(query, 10, where)
            assert [i for i, _ in hits] == brute_force(vectors, metas, alive, query, 10, where), where


def test_a_partition_turns_into_hnsw_and_keeps_every_row() -> None:
    rng = np.random.default_rng(5)
    vectors = unit(rng, 300)
    index = VectorIndex(16, IndexOptions(hnsw_threshold=100))
    for start in range(0, 300, 30):
        index.upsert(np.arange(start, start + 30), vectors[start:start + 30])
    assert index.partitions["shared"].hnsw
    assert sorted(index.ids().tolist()) == list(range(300))
    assert all(index.search(vectors[i], 1)[0][0] == i for i in range(0, 300, 17))
    assert index.memory_bytes() <= 2 * 300 * 16 * 4 + 300 * 600  # vectors, links, metadata and the id map


def test_snapshot_plus_delta_reproduces_the_index(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vectors = unit(rng, 40)
    log = IndexLog(tmp_path, "chunks")
    index = VectorIndex(16)
    for gen in range(1, 11):
        changes = [("upsert", list(range(gen * 4 - 4, gen * 4)), vectors[gen * 4 - 4: gen * 4],
                    [VectorMeta(owner="u" if gen % 2 else None)] * 4)]
        if gen == 6:
            changes.append(("delete", [0, 1]))
        index.apply(changes)
        log.append(gen, changes, index)
    assert [g for _, g in index_files(tmp_path, "chunks")] == [1], "one snapshot, then only the delta grew"
    reader = IndexLog(tmp_path, "chunks")
    loaded = reader.load(10)
    assert loaded is not None and sorted(loaded.ids().tolist()) == list(range(2, 40))
    for q in range(0, 40, 7):
        assert loaded.search(vectors[q], 5, VectorFilter(owner="u", shared=True)) == \
            index.search(vectors[q], 5, VectorFilter(owner="u", shared=True))
    assert reader.load(12) is None, "a generation the files do not reach is not faked"
    # a torn record at the tail (a writer killed mid-append) is ignored, and the rest still loads
    delta = tmp_path / "chunks.1.delta"
    with open(delta, "ab") as handle:
        handle.write(b"VDL1\x00\x10")
    assert IndexLog(tmp_path, "chunks").load(10) is not None


def test_the_snapshot_is_rewritten_when_the_delta_grows(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    log = IndexLog(tmp_path, "thoughts", IndexOptions(delta_fraction=0.01))
    index = VectorIndex(256)
    vectors = unit(rng, 600, dim=256)
    for gen in range(1, 601):
        change = [("upsert", [gen], vectors[gen - 1: gen], [VectorMeta(owner="u")])]
        index.apply(change)
        log.append(gen, change, index)
    snapshots = index_files(tmp_path, "thoughts")
    assert len(snapshots) == 1 and snapshots[0][1] > 1, "older snapshots and deltas are removed"
    assert len([p for p in tmp_path.iterdir() if p.suffix == ".delta"]) == 1
    loaded = IndexLog(tmp_path, "thoughts").load(600)
    assert loaded is not None and len(loaded) == 600


def test_a_coalesced_replay_means_what_the_sequence_meant() -> None:
    from copilot.storage.vectors import coalesced

    rng = np.random.default_rng(8)
    vectors = unit(rng, 12)
    changes = [("upsert", [1, 2], vectors[0:2], [VectorMeta(owner="u")] * 2),
               ("upsert", [3], vectors[2:3], [VectorMeta()]),
               ("upsert", [2], vectors[3:4], [VectorMeta(owner="v")]),  # the same id again: the run breaks
               ("delete", [1]),
               ("upsert", [4, 5], vectors[4:6], [VectorMeta(paper="p")] * 2),
               ("meta", [4], [VectorMeta(paper="q", owner="u")])]
    joined = coalesced(changes)
    assert [op[0] for op in joined] == ["upsert", "upsert", "delete", "upsert", "meta"]
    one_by_one, at_once = VectorIndex(16), VectorIndex(16)
    for change in changes:
        one_by_one.apply([change])
    at_once.apply(joined)
    assert one_by_one.metas() == at_once.metas()
    for q in range(6):
        assert one_by_one.search(vectors[q], 4) == at_once.search(vectors[q], 4)


def test_a_clean_close_snapshots_a_big_delta(tmp_path: Path) -> None:
    from copilot.storage import Store

    options = IndexOptions(min_delta_bytes=10**9, close_snapshot_bytes=5_000)
    store = Store(tmp_path / "c.db", tmp_path / "index", options)
    rng = np.random.default_rng(9)
    for batch in range(12):
        store.insert_with_vectors("memories", [{"user_id": "u", "text": f"m{batch}.{i}"} for i in range(4)],
                                  unit(rng, 4, dim=64))
    assert [g for _, g in index_files(tmp_path / "index", "memories")] == [1], "only the delta grew"
    store.close()
    assert [g for _, g in index_files(tmp_path / "index", "memories")] == [12]
    with Store(tmp_path / "c.db", tmp_path / "index", options) as again:
        assert len(again.index("memories")) == 48 and again.check_consistency()["memories"]


def test_a_garbled_record_in_the_middle_of_the_delta_is_not_replayed(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    vectors = unit(rng, 10)
    log = IndexLog(tmp_path, "memories")
    index = VectorIndex(16)
    for gen in range(1, 6):
        change = [("upsert", [gen], vectors[gen:gen + 1], [VectorMeta(owner="u")])]
        index.apply(change)
        log.append(gen, change, index)
    delta = tmp_path / "memories.1.delta"
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit inside the third of four records
    delta.write_bytes(bytes(data))
    assert IndexLog(tmp_path, "memories").load(2) is not None, "the records before it still replay"
    assert IndexLog(tmp_path, "memories").load(5) is None, "what follows a bad record is never trusted"


def test_selective_filters_on_a_graph_widen_then_scan_exactly() -> None:
    rng = np.random.default_rng(13)
    n = 3000
    vectors = unit(rng, n)
    confidence = rng.random(n)
    metas = [VectorMeta(confidence=float(c)) for c in confidence]
    index = VectorIndex.build(16, np.arange(n), vectors, metas, IndexOptions(hnsw_threshold=100, ef_search=16))
    assert index.partitions["shared"].hnsw
    for floor, exact in ((0.8, False), (0.995, True)):  # a fifth of the rows pass; then a handful
        where = VectorFilter(min_confidence=floor)
        found_total = 0
        for q in range(0, n, 300):
            hits = index.search(vectors[q], 10, where)
            assert all(confidence[i] >= floor for i, _ in hits)
            truth = brute_force(vectors, metas, set(range(n)), vectors[q], 10, where)
            assert len(hits) == len(truth), "k results whenever k rows pass"
            found_total += len({i for i, _ in hits} & set(truth))
            if exact:
                assert [i for i, _ in hits] == truth
        assert found_total >= 0.9 * 10 * len(range(0, n, 300))


def test_deleting_many_rows_compacts_and_keeps_every_other_row() -> None:
    rng = np.random.default_rng(14)
    vectors = unit(rng, 400)
    metas = [VectorMeta(owner=None if i % 2 else "u", paper=f"p{i % 7}") for i in range(400)]
    index = VectorIndex.build(16, np.arange(400), vectors, metas, IndexOptions(hnsw_threshold=10_000))
    gone = set(range(0, 400, 3)) | set(range(1, 400, 5))
    index.delete(sorted(gone))
    alive = set(range(400)) - gone
    assert index.partitions["shared"].dead == 0 and index.partitions["u:u"].dead == 0, "compacted"
    assert set(index.metas()) == alive
    for where in (VectorFilter(), VectorFilter(owner="u", shared=True, papers=frozenset({"p2", "p5"}))):
        for q in range(0, 400, 41):
            assert [i for i, _ in index.search(vectors[q], 10, where)] == \
                brute_force(vectors, metas, alive, vectors[q], 10, where)


def test_the_stores_searches_mean_what_the_sql_means(store) -> None:  # noqa: ANN001 - on each backend
    """Through the store of each backend: after deletes and metadata changes, every filter returns the ten rows
    the SQL condition selects that are nearest to the query, in order (the embedded index and pgvector alike)."""
    from copilot.storage.store import VECTOR_META, filter_sql
    from copilot.types import Paper

    rng = np.random.default_rng(17)
    owners = {"p0": None, "p1": None, "p2": None, "p3": "a", "p4": "b"}
    store.papers.add_many([Paper(paper, user_id=owner, title=paper) for paper, owner in owners.items()])
    vectors = {"chunks": unit(rng, 300), "thoughts": unit(rng, 300)}
    ids = {"chunks": store.insert_with_vectors(
        "chunks", [{"paper_id": f"p{i % 5}", "seq": i, "text": f"c{i}"} for i in range(300)], vectors["chunks"])}
    ids["thoughts"] = store.insert_with_vectors(
        "thoughts", [{"user_id": [None, "a", "b", "c"][i % 4], "text": f"t{i}", "confidence": float(rng.random()),
                      "public": int(i % 7 == 0), "flagged": int(i % 11 == 0)} for i in range(300)], vectors["thoughts"])
    for kind in ids:
        store.delete_with_vectors(kind, ids[kind][::9])
    with store.transaction():
        store.thoughts.set_confidence(ids["thoughts"][10], 0.99)
        store.thoughts.flag_built_on([])
        store.conn.execute("UPDATE thoughts SET public = 1, user_id = 'b' WHERE id = ?", [ids["thoughts"][12]])
        store.meta_changed("thoughts", [ids["thoughts"][12]])
    by_id = {kind: dict(zip(ids[kind], vectors[kind], strict=True)) for kind in ids}
    for kind, where in [("chunks", f) for f in FILTERS] + [("thoughts", f) for f in FILTERS if f.papers is None]:
        sql, params = filter_sql(where)
        selected = [r[0] for r in store.conn.execute(f"SELECT id FROM ({VECTOR_META[kind]}) AS m WHERE {sql}", params)]
        for q in (3, 150):
            query = vectors[kind][q]
            truth = sorted(selected, key=lambda i: -float(by_id[kind][i] @ query))[:10]
            found = store.search(kind, query, 10, where)
            assert [i for i, _ in found] == truth, (kind, where)
            assert np.allclose([s for _, s in found], [float(by_id[kind][i] @ query) for i in truth], atol=1e-5)
