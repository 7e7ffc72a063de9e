"""The embedded vector index: FAISS partitions searched with metadata filters, never with id lists.

Why this shape (measured on 2 cores, 384-d; `python -m copilot.bench scale`):
- **Partitioned by owner.** Rows with no owner (chunks of shared arXiv papers) form one partition, each user's
  own rows (uploads, thoughts, memories) another, and the opt-in public pool a third kind. A scoped question
  searches only the partitions its filter names, so scoping costs nothing per question: the old design read
  every allowed id from SQLite and handed FAISS an id list, two scans of the whole library per question.
- **Exact while small, HNSW when large.** A partition is an exact ``IndexFlatIP`` until it holds
  ``hnsw_threshold`` vectors, then an ``IndexHNSWFlat``. Scores are inner products of unit vectors: cosines.
- **Row filters are metadata columns.** Paper, confidence, flagged and owner sit beside each position in numpy
  columns. A paper filter scores only that paper's rows (kept per paper), exactly; other filters post-filter
  the ANN candidates and widen the search until k survive, falling back to an exact masked scan.
- **Deletes are tombstones.** HNSW cannot remove a vector; a deleted position is marked dead and skipped, and
  a partition is compacted when its dead rows pass a quarter of it.

Persistence is a snapshot plus an append-only delta (:class:`IndexLog`): an insert appends only its own
vectors, and the snapshot is rewritten when the delta passes ``delta_fraction`` of it. The records stay the
source of truth: whatever cannot be brought exactly to the database's generation is rebuilt from them.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import pickle
import re
import shutil
import struct
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from copilot.types import VectorFilter, VectorMeta

SHARED = "shared"  # partition of rows with no owner
PUBLIC = "public"  # partition of rows in the opt-in public pool
_NONE = -1  # code of "no owner" / "no paper"


@dataclass(frozen=True)
class IndexOptions:
    """How the embedded index grows; each is a setting (``COPILOT_INDEX_*``, see docs/configuration.md)."""

    hnsw_threshold: int = 20_000  # a partition becomes HNSW at this many vectors
    hnsw_m: int = 32  # graph degree
    ef_construction: int = 128
    ef_search: int = 256  # at least the number of candidates asked for
    delta_fraction: float = 0.05  # rewrite the snapshot when the delta passes this fraction of it
    min_delta_bytes: int = 256 * 1024  # ...and at least this size: tiny indices are not rewritten per insert
    close_snapshot_bytes: int = 1024 * 1024  # on a clean close, snapshot a delta at least this big


class _Column:
    """A growable numpy array (amortised O(1) append)."""

    def __init__(self, dtype: type, values: np.ndarray | None = None) -> None:
        self.data = np.zeros(16, dtype=dtype) if values is None else np.array(values, dtype=dtype)
        self.n = 0 if values is None else len(values)

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            grown = np.zeros(max(need, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n:need] = values
        self.n = need

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.n]


def _group_by_paper(papers: np.ndarray) -> dict[int, list[int]]:
    """Positions per paper code, built in bulk (a per-position loop costs seconds at a million rows)."""
    positions = np.flatnonzero(papers != _NONE)
    if not len(positions):
        return {}
    codes = papers[positions]
    order = np.argsort(codes, kind="stable")
    codes, positions = codes[order], positions[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    bounds = np.r_[starts, len(codes)]
    return {int(codes[a]): positions[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:], strict=True)}


class _Partition:
    """One FAISS index with a metadata column per position."""

    def __init__(self, dim: int, options: IndexOptions, hnsw: bool = False) -> None:
        self.dim = dim
        self.options = options
        self.index = self._new_index(hnsw)
        self.ids = _Column(np.int64)
        self.alive = _Column(np.bool_)
        self.owner = _Column(np.int32)
        self.paper = _Column(np.int32)
        self.confidence = _Column(np.float64)  # float64: the same comparisons as SQL's REAL
        self.flagged = _Column(np.bool_)
        self.by_paper: dict[int, list[int]] = {}
        self.dead = 0
        self.compactions = 0

    def _new_index(self, hnsw: bool) -> faiss.Index:
        if not hnsw:
            return faiss.IndexFlatIP(self.dim)
        index = faiss.IndexHNSWFlat(self.dim, self.options.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.options.ef_construction
        return index

    @property
    def hnsw(self) -> bool:
        return isinstance(self.index, faiss.IndexHNSWFlat)

    @property
    def live(self) -> int:
        return self.ids.n - self.dead

    def vectors(self) -> np.ndarray:
        """Every stored vector, a view into FAISS's own storage (no copy)."""
        flat = faiss.downcast_index(self.index.storage) if self.hnsw else self.index
        n = int(flat.ntotal)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)

    def add(self, ids: np.ndarray, vectors: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Append rows; ``codes`` has columns owner, paper, confidence, flagged. Returns their positions."""
        if not self.hnsw and self.live + len(ids) >= self.options.hnsw_threshold:
            self.compact(hnsw=True)
        start = self.ids.n
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self.ids.extend(ids)
        self.alive.extend(np.ones(len(ids), dtype=np.bool_))
        self._extend_meta(codes)
        positions = np.arange(start, start + len(ids))
        for position, paper in zip(positions, codes[:, 1].astype(np.int32), strict=True):
            if paper != _NONE:
                self.by_paper.setdefault(int(paper), []).append(int(position))
        return positions

    def _extend_meta(self, codes: np.ndarray) -> None:
        self.owner.extend(codes[:, 0].astype(np.int32))
        self.paper.extend(codes[:, 1].astype(np.int32))
        self.confidence.extend(codes[:, 2].astype(np.float64))
        self.flagged.extend(codes[:, 3].astype(np.bool_))

    def kill(self, position: int) -> None:
        if self.alive.data[position]:
            self.alive.data[position] = False
            self.dead += 1

    def set_meta(self, position: int, code: np.ndarray) -> None:
        old_paper = int(self.paper.data[position])
        self.owner.data[position], self.paper.data[position] = int(code[0]), int(code[1])
        self.confidence.data[position], self.flagged.data[position] = code[2], bool(code[3])
        if old_paper != int(code[1]):
            if old_paper != _NONE:
                self.by_paper[old_paper].remove(position)
            if int(code[1]) != _NONE:
                self.by_paper.setdefault(int(code[1]), []).append(position)

    def meta_codes(self, positions: np.ndarray) -> np.ndarray:
        return np.column_stack([self.owner.view[positions], self.paper.view[positions],
                                self.confidence.view[positions], self.flagged.view[positions]])

    def needs_compaction(self) -> bool:
        return self.dead > 0 and self.dead * 4 >= max(self.ids.n, 64)

    def compact(self, hnsw: bool | None = None) -> None:
        """Rebuild with live rows only (every position moves: the owner re-reads them, see ``compactions``)."""
        keep = np.flatnonzero(self.alive.view)
        vectors = np.array(self.vectors()[keep])
        ids, codes = self.ids.view[keep].copy(), self.meta_codes(keep)
        hnsw = self.hnsw if hnsw is None else hnsw
        fresh = _Partition(self.dim, self.options, hnsw=hnsw or len(keep) >= self.options.hnsw_threshold)
        if len(keep):
            fresh.index.add(vectors)
            fresh.ids.extend(ids)
            fresh.alive.extend(np.ones(len(keep), dtype=np.bool_))
            fresh._extend_meta(codes)
            fresh.by_paper = _group_by_paper(fresh.paper.view)
        fresh.compactions = self.compactions + 1
        self.__dict__.update(fresh.__dict__)

    # ----- search ------------------------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int, rule: _RowRule) -> list[tuple[int, float]]:
        n = self.ids.n
        if n == 0 or k <= 0:
            return []
        if rule.papers is not None:
            lists = [self.by_paper.get(code) for code in rule.papers]
            positions = np.fromiter((p for found in lists if found for p in found), dtype=np.int64)
            return self._exact(query, k, positions, rule)
        if not self.hnsw:
            return self._exact(query, k, None, rule)
        wanted = k + min(self.dead, 4 * k)
        while True:
            fetch = min(wanted, n)
            if fetch > k and fetch * 8 > n:
                # a filter this selective: one exact masked scan is cheaper than a wider graph walk
                return self._exact(query, k, None, rule)
            params = faiss.SearchParametersHNSW(efSearch=max(self._ef(), fetch))
            scores, positions = self.index.search(query.reshape(1, -1), fetch, params=params)
            found = positions[0] >= 0
            positions, scores = positions[0][found], scores[0][found]
            keep = rule.mask(self, positions)
            if keep.sum() >= k or fetch >= n:
                return [(int(self.ids.data[p]), float(s)) for p, s in zip(positions[keep][:k], scores[keep][:k],
                                                                          strict=True)]
            wanted = fetch * 4

    def _ef(self) -> int:
        """The graph search's beam: ``ef_search`` up to 100k vectors, widened by half for each tenfold growth
        beyond (``copilot.bench scale`` at 1M: recall@10 against exact search 0.960-0.970 with ef 256 over
        three runs, 0.970 with 384, for about 0.1 ms more)."""
        n = max(self.ids.n, 1)
        return int(self.options.ef_search * (1 + 0.5 * max(0.0, np.log10(n / 100_000))))

    def _exact(self, query: np.ndarray, k: int, positions: np.ndarray | None, rule: _RowRule
               ) -> list[tuple[int, float]]:
        vectors = self.vectors()
        if positions is None:
            positions = np.arange(self.ids.n)
            rows = vectors
        else:
            if not len(positions):
                return []
            rows = vectors[positions]
        keep = rule.mask(self, positions)
        if not keep.all():
            positions, rows = positions[keep], rows[keep]
        if not len(positions):
            return []
        scores = rows @ query
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self.ids.data[positions[t]]), float(scores[t])) for t in top]


@dataclass(frozen=True)
class _RowRule:
    """A filter's per-row terms for one partition, as codes."""

    papers: tuple[int, ...] | None = None
    owners: tuple[int, ...] | None = None  # allowed owner codes (public partition only)
    min_confidence: float | None = None
    unflagged: bool = False

    def mask(self, part: _Partition, positions: np.ndarray) -> np.ndarray:
        keep = part.alive.data[positions].copy()
        if self.owners is not None:
            keep &= np.isin(part.owner.data[positions], self.owners)
        if self.min_confidence is not None:
            keep &= part.confidence.data[positions] >= self.min_confidence
        if self.unflagged:
            keep &= ~part.flagged.data[positions]
        return keep


class VectorIndex:
    """Every vector of one kind, with its metadata: ``upsert``, ``delete``, ``set_meta``, ``search``."""

    def __init__(self, dim: int, options: IndexOptions | None = None) -> None:
        self.dim = dim
        self.options = options or IndexOptions()
        self.partitions: dict[str, _Partition] = {}
        self.located: dict[int, tuple[str, int]] = {}  # id -> (partition, position)
        self.strings: list[str] = []
        self._codes: dict[str, int] = {}
        self.token: str | None = None  # the generation token of the database state this index mirrors

    def __len__(self) -> int:
        return len(self.located)

    @classmethod
    def build(cls, dim: int, ids: np.ndarray, vectors: np.ndarray, metas: Sequence[VectorMeta] | None = None,
              options: IndexOptions | None = None) -> VectorIndex:
        index = cls(dim, options)
        index.upsert(ids, vectors, metas)
        return index

    def ids(self) -> np.ndarray:
        """Every id held."""
        return np.fromiter(self.located, dtype=np.int64, count=len(self.located))

    def _code(self, value: str | None) -> int:
        if value is None:
            return _NONE
        code = self._codes.get(value)
        if code is None:
            code = self._codes[value] = len(self.strings)
            self.strings.append(value)
        return code

    def _encode(self, meta: VectorMeta) -> tuple[str, list[float]]:
        key = PUBLIC if meta.public else SHARED if meta.owner is None else f"u:{meta.owner}"
        confidence = np.nan if meta.confidence is None else float(meta.confidence)
        return key, [self._code(meta.owner), self._code(meta.paper), confidence, float(meta.flagged)]

    def _partition(self, key: str) -> _Partition:
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = _Partition(self.dim, self.options)
        return part

    def upsert(self, ids: Iterable[int], vectors: np.ndarray, metas: Sequence[VectorMeta] | None = None) -> None:
        """Add rows, replacing any held under the same ids."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        metas = list(metas) if metas is not None else [VectorMeta()] * len(ids)
        if len(metas) != len(ids):
            raise ValueError(f"{len(ids)} ids for {len(metas)} metadata rows")
        self.delete(ids)
        groups: dict[str, list[int]] = {}
        codes = []
        for row, meta in enumerate(metas):
            key, code = self._encode(meta)
            groups.setdefault(key, []).append(row)
            codes.append(code)
        codes_array = np.array(codes, dtype=np.float64).reshape(-1, 4)
        for key, rows in groups.items():
            part = self._partition(key)
            compactions = part.compactions
            positions = part.add(ids[rows], vectors[rows], codes_array[rows])
            if part.compactions != compactions:  # it was rebuilt on its way to HNSW: every position moved
                self._relocate(key, part)
            else:
                for item_id, position in zip(ids[rows], positions, strict=True):
                    self.located[int(item_id)] = (key, int(position))

    def _relocate(self, key: str, part: _Partition) -> None:
        positions = np.flatnonzero(part.alive.view)
        self.located.update(zip(part.ids.data[positions].tolist(),
                                zip(itertools.repeat(key), positions.tolist(), strict=False), strict=True))

    def delete(self, ids: Iterable[int]) -> int:
        removed = 0
        touched = set()
        for item_id in np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64):
            where = self.located.pop(int(item_id), None)
            if where is None:
                continue
            key, position = where
            self.partitions[key].kill(position)
            touched.add(key)
            removed += 1
        for key in touched:
            part = self.partitions[key]
            if part.needs_compaction():
                part.compact()
                self._relocate(key, part)
        return removed

    remove = delete

    def set_meta(self, ids: Sequence[int], metas: Sequence[VectorMeta]) -> None:
        """New metadata for held rows; a row whose partition changes (owner, public) moves with its vector."""
        for item_id, meta in zip(ids, metas, strict=True):
            where = self.located.get(int(item_id))
            if where is None:
                continue
            key, code = self._encode(meta)
            if key == where[0]:
                self.partitions[key].set_meta(where[1], np.array(code))
            else:
                self.upsert([int(item_id)], self.vector(int(item_id))[None], [meta])

    def metas(self) -> dict[int, VectorMeta]:
        """Every id held with its metadata, decoded (for consistency checks)."""
        def text(code: float) -> str | None:
            return None if int(code) == _NONE else self.strings[int(code)]
        found = {}
        for item_id, (key, position) in self.located.items():
            part = self.partitions[key]
            confidence = float(part.confidence.data[position])
            found[item_id] = VectorMeta(owner=text(part.owner.data[position]), paper=text(part.paper.data[position]),
                                        public=key == PUBLIC, confidence=None if np.isnan(confidence) else confidence,
                                        flagged=bool(part.flagged.data[position]))
        return found

    def vector(self, item_id: int) -> np.ndarray:
        key, position = self.located[int(item_id)]
        return np.array(self.partitions[key].vectors()[position])

    def search(self, query: np.ndarray, k: int, where: VectorFilter | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest rows within ``where``, as (id, cosine), best first."""
        if not self.located or k <= 0:
            return []
        query = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dim)
        where = where or VectorFilter()
        papers = None
        if where.papers is not None:
            papers = tuple(self._codes[p] for p in where.papers if p in self._codes)
            if not papers:
                return []
        hits: list[tuple[int, float]] = []
        if where.scoped_by_owner:  # only the partitions the filter names: one per user would be many
            keys = [SHARED] * where.shared + [PUBLIC] + ([f"u:{where.owner}"] if where.owner is not None else [])
            named = [(key, self.partitions[key]) for key in keys if key in self.partitions]
        else:
            named = list(self.partitions.items())
        for key, part in named:
            rule = self._rule(key, where, papers)
            if rule is not None:
                hits += part.search(query, k, rule)
        hits.sort(key=lambda hit: -hit[1])
        return hits[:k]

    def _rule(self, key: str, where: VectorFilter, papers: tuple[int, ...] | None) -> _RowRule | None:
        """The per-row terms of ``where`` in partition ``key``, or None when the partition is out of scope."""
        owners = None
        if where.scoped_by_owner:
            if key == PUBLIC:
                if not where.public:
                    allowed = ([self._codes[where.owner]] if where.owner in self._codes else []) + (
                        [_NONE] if where.shared else [])
                    if not allowed:
                        return None
                    owners = tuple(allowed)
            elif key == SHARED:
                if not where.shared:
                    return None
            elif where.owner is None or key != f"u:{where.owner}":
                return None
        return _RowRule(papers, owners, where.min_confidence, where.unflagged)

    def memory_bytes(self) -> int:
        """What the index holds: vectors, graph links, metadata columns, and (estimated) its Python maps."""
        total = 0
        for part in self.partitions.values():
            total += part.ids.n * self.dim * 4
            if part.hnsw:
                hnsw = part.index.hnsw
                total += faiss.vector_to_array(hnsw.neighbors).nbytes + faiss.vector_to_array(hnsw.offsets).nbytes
                total += faiss.vector_to_array(hnsw.levels).nbytes
            total += sum(c.data.nbytes for c in (part.ids, part.alive, part.owner, part.paper, part.confidence,
                                                  part.flagged))
            total += sum(sys.getsizeof(rows) for rows in part.by_paper.values()) + 28 * part.ids.n
        # the id map: the dict, and per id a tuple, a partition name reference and two small ints
        total += sys.getsizeof(self.located) + len(self.located) * (sys.getsizeof((0, 0)) + 2 * 28)
        return total

    # ----- changes as data (what the delta log records) ----------------------------------------------

    def apply(self, ops: Sequence[tuple]) -> None:
        """Apply changes recorded as ("upsert", ids, vectors, metas), ("delete", ids) or ("meta", ids, metas)."""
        for op in ops:
            if op[0] == "upsert":
                self.upsert(op[1], op[2], op[3])
            elif op[0] == "delete":
                self.delete(op[1])
            elif op[0] == "meta":
                self.set_meta(op[1], op[2])
            else:
                raise ValueError(f"unknown index change {op[0]!r}")

    # ----- snapshots ---------------------------------------------------------------------------------

    def write_to(self, directory: Path) -> None:
        """Write every partition and the metadata into ``directory`` (which must exist), fsynced."""
        parts = {}
        for n, (key, part) in enumerate(self.partitions.items()):
            name = f"{n}.faiss"
            _write_partition(part.index, directory / name)
            parts[key] = {"file": name, "ids": part.ids.view, "alive": part.alive.view, "owner": part.owner.view,
                          "paper": part.paper.view, "confidence": part.confidence.view,
                          "flagged": part.flagged.view, "dead": part.dead}
        meta = {"dim": self.dim, "strings": self.strings, "partitions": parts, "token": self.token}
        with open(directory / "meta.pkl", "wb") as handle:
            pickle.dump(meta, handle, protocol=pickle.HIGHEST_PROTOCOL)
            handle.flush()
            os.fsync(handle.fileno())

    @classmethod
    def read_from(cls, directory: Path, options: IndexOptions | None = None) -> VectorIndex:
        with open(directory / "meta.pkl", "rb") as handle:
            meta = pickle.load(handle)  # noqa: S301 - our own data directory
        index = cls(int(meta["dim"]), options)
        index.strings = list(meta["strings"])
        index.token = meta.get("token")
        index._codes = {s: i for i, s in enumerate(index.strings)}
        for key, saved in meta["partitions"].items():
            part = _Partition(index.dim, index.options)
            part.index = faiss.read_index(str(directory / saved["file"]))
            if part.index.ntotal != len(saved["ids"]):
                raise ValueError(f"{directory}: partition {key} holds {part.index.ntotal} vectors, "
                                 f"its metadata {len(saved['ids'])}")
            if part.hnsw:
                part.index.hnsw.efConstruction = index.options.ef_construction
            for column in ("ids", "alive", "owner", "paper", "confidence", "flagged"):
                setattr(part, column, _Column(getattr(part, column).data.dtype, saved[column]))
            part.dead = int(saved["dead"])
            part.by_paper = _group_by_paper(part.paper.view)
            index.partitions[key] = part
            index._relocate(key, part)
        return index


def remove_path(path: Path) -> None:
    """Delete a file or a folder with everything in it; gone already is fine."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def coalesced(changes: Sequence[tuple]) -> list[tuple]:
    """``changes`` with runs of upserts joined into one: a replayed delta then adds its vectors to an HNSW graph
    in large parallel batches instead of one record at a time. A run breaks at any other change, and at an id
    it already holds, so the result means exactly what the sequence did."""
    out: list[tuple] = []
    ids: list[int] = []
    held: set[int] = set()
    vectors: list[np.ndarray] = []
    metas: list = []

    def flush() -> None:
        if ids:
            out.append(("upsert", list(ids), np.vstack(vectors), list(metas)))
            ids.clear(), held.clear(), vectors.clear(), metas.clear()

    for op in changes:
        if op[0] != "upsert":
            flush()
            out.append(op)
            continue
        op_ids = [int(i) for i in op[1]]
        if not held.isdisjoint(op_ids) or len(set(op_ids)) != len(op_ids):
            flush()
        ids.extend(op_ids)
        held.update(op_ids)
        vectors.append(np.asarray(op[2], dtype=np.float32).reshape(len(op_ids), -1))
        metas.extend(op[3] if op[3] is not None else [VectorMeta()] * len(op_ids))
    flush()
    return out


def _write_partition(index: faiss.Index, path: Path) -> None:
    faiss.write_index(index, str(path))
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


# ----- snapshot + delta on disk ---------------------------------------------------------------------

_SNAPSHOT = re.compile(r"^(?P<kind>[a-z_]+)\.(?P<gen>\d+)\.snap$")
_DELTA = re.compile(r"^(?P<kind>[a-z_]+)\.(?P<gen>\d+)\.delta$")
_TEMP = re.compile(r"^\.(?P<kind>[a-z_]+)\..*\.tmp-(?P<pid>\d+)$")
_OLD_FORMAT = re.compile(r"^(?P<kind>[a-z_]+)\.\d+\.faiss$|^\.(?P<tkind>[a-z_]+)\..*\.tmp$")
_MAGIC = b"VDL1"
_HEADER = struct.Struct("<4sQI")  # magic, payload length, crc32 of the payload


class IndexLog:
    """The files of one kind: ``<kind>.<gen>.snap/`` (the index as of generation gen) and ``<kind>.<gen>.delta``
    (the changes after it, one record per generation, appended after each commit).

    A record is ``magic | length | crc32 | pickled (generation, token, changes)``; a torn or garbled tail is
    ignored. The token (random per generation bump, kept in the database) tells an index made for this database's
    history from one made for a generation number it later reused (a restored backup, commits lost in a power cut).
    Snapshots are written to a temporary folder and renamed into place, so a reader sees a whole snapshot or
    none. Deltas are not fsynced: losing one only costs a rebuild from the records, which are the truth.
    Writers serialise on ``<kind>.lock``; readers need no lock.
    """

    def __init__(self, directory: Path, kind: str, options: IndexOptions | None = None) -> None:
        self.directory = directory
        self.kind = kind
        self.options = options or IndexOptions()
        directory.mkdir(parents=True, exist_ok=True)
        self.base: int | None = None  # the snapshot the loaded index came from
        self._offset = 0  # how far the base's delta has been read
        self._pending: dict[int, tuple] = {}  # (token, changes) read ahead of the loaded generation

    # ----- what is on disk ---------------------------------------------------------------------------

    def snapshots(self) -> list[tuple[Path, int]]:
        return sorted(_matching(self.directory, _SNAPSHOT, self.kind), key=lambda pair: pair[1])

    def delta_path(self, base: int) -> Path:
        return self.directory / f"{self.kind}.{base}.delta"

    def files(self) -> list[Path]:
        """Every file or folder this kind has on disk."""
        return [p for p in self.directory.iterdir() if p.name.startswith(f"{self.kind}.")
                or p.name.startswith(f".{self.kind}.")] if self.directory.is_dir() else []

    def clean_leftovers(self) -> list[Path]:
        """Remove temporary snapshot folders of dead writers and files of the old one-file format."""
        removed = []
        for path in list(self.directory.iterdir()):
            temp = _TEMP.match(path.name)
            old = _OLD_FORMAT.match(path.name)
            if temp and temp["kind"] == self.kind and not _alive(int(temp["pid"])):
                remove_path(path)
                removed.append(path)
            elif old and self.kind in (old["kind"], old["tkind"]):
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def stale_files(self, current: int) -> list[Path]:
        """Files of this kind no load at generation ``current`` reads: snapshots other than the newest at or before
        it, deltas of other snapshots, temporary folders of dead writers, files of the old format. Call it under
        :meth:`locked`, so no writer is between writing a snapshot and removing what it replaces."""
        snapshots = [(path, gen) for path, gen in self.snapshots() if gen <= current]
        keep = {snapshots[-1][0], self.delta_path(snapshots[-1][1])} if snapshots else set()
        keep.add(self.directory / f"{self.kind}.lock")
        stale = []
        for path in self.files():
            temp = _TEMP.match(path.name)
            if path in keep or (temp and _alive(int(temp["pid"]))):
                continue
            stale.append(path)
        return sorted(stale)

    # ----- reading -----------------------------------------------------------------------------------

    def load(self, target: int) -> VectorIndex | None:
        """The index exactly at generation ``target`` from the newest snapshot at or before it plus its delta;
        None when the files cannot give exactly that (then the caller rebuilds from the records)."""
        for path, gen in reversed(self.snapshots()):
            if gen > target:
                continue
            try:
                index = VectorIndex.read_from(path, self.options)
            except (OSError, RuntimeError, ValueError, EOFError, KeyError, pickle.UnpicklingError):
                return None
            self.base, self._offset, self._pending = gen, 0, {}
            try:
                return index if self.catch_up(index, gen, target) else None
            except Exception:  # noqa: BLE001 - a record that does not apply: the caller rebuilds
                return None
        return None

    def catch_up(self, index: VectorIndex, current: int, target: int) -> bool:
        """Apply the delta's records after ``current`` up to ``target``; False if one is missing."""
        if self.base is None or self.base > current:
            return False
        self._read_delta()
        if any(gen not in self._pending for gen in range(current + 1, target + 1)):
            return False
        records = [self._pending.pop(gen) for gen in range(current + 1, target + 1)]
        index.apply(coalesced([op for _, changes in records for op in changes]))
        if records:
            index.token = records[-1][0]
        for gen in [g for g in self._pending if g <= target]:
            del self._pending[gen]
        return True

    def _read_delta(self) -> None:
        try:
            with open(self.delta_path(self.base), "rb") as handle:  # type: ignore[arg-type]
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        at = 0
        while at + _HEADER.size <= len(data):
            magic, length, crc = _HEADER.unpack_from(data, at)
            payload = data[at + _HEADER.size: at + _HEADER.size + length]
            if magic != _MAGIC or len(payload) < length or zlib.crc32(payload) != crc:
                break  # a torn tail (a writer killed mid-append, or still appending): stop here
            generation, token, changes = pickle.loads(payload)  # noqa: S301 - our own data directory
            self._pending[int(generation)] = (token, changes)  # a later record of one generation wins
            at += _HEADER.size + length
        self._offset += at

    # ----- writing -----------------------------------------------------------------------------------

    def append(self, generation: int, changes: list, index: VectorIndex) -> None:
        """Record ``changes`` (which brought ``index`` to ``generation``); rewrite the snapshot when due."""
        with self.locked():
            newest = self.snapshots()
            base = newest[-1][1] if newest else None
            if base is None or base >= generation:
                self._snapshot(index, generation)
                return
            payload = pickle.dumps((generation, index.token, changes), protocol=pickle.HIGHEST_PROTOCOL)
            path = self.delta_path(base)
            _append_bytes(path, _HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload)
            if self.base == base:
                self._offset = path.stat().st_size  # our own record: nothing to read back
            delta_bytes = path.stat().st_size
            if delta_bytes > max(self.options.delta_fraction * _size(newest[-1][0]), self.options.min_delta_bytes):
                self._snapshot(index, generation)

    def snapshot_if_delta(self, index: VectorIndex, generation: int) -> bool:
        """Snapshot ``index`` (which is at ``generation``) if the newest snapshot's delta holds at least
        ``close_snapshot_bytes``; True when it did."""
        with self.locked():
            newest = self.snapshots()
            if not newest or newest[-1][1] >= generation:
                return False
            delta = self.delta_path(newest[-1][1])
            if not delta.exists() or delta.stat().st_size < self.options.close_snapshot_bytes:
                return False
            self._snapshot(index, generation)
            return True

    def write_snapshot(self, index: VectorIndex, generation: int) -> None:
        with self.locked():
            self._snapshot(index, generation)

    def _snapshot(self, index: VectorIndex, generation: int) -> None:
        temp = self.directory / f".{self.kind}.{generation}.snap.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir()
        try:
            index.write_to(temp)
            final = self.directory / f"{self.kind}.{generation}.snap"
            shutil.rmtree(final, ignore_errors=True)
            os.replace(temp, final)
            _fsync_dir(self.directory)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
        self.delta_path(generation).touch()
        for path, gen in self.snapshots():
            if gen < generation:
                shutil.rmtree(path, ignore_errors=True)
        for path, gen in _matching(self.directory, _DELTA, self.kind):
            if gen < generation:
                path.unlink(missing_ok=True)
        self.base, self._offset, self._pending = generation, 0, {}

    def remove_all(self) -> None:
        with self.locked():
            for path in self.files():
                if path.name == f"{self.kind}.lock":
                    continue
                remove_path(path)
        self.base, self._offset, self._pending = None, 0, {}

    def locked(self) -> _FileLock:
        """The writers' lock of this kind (held while its files are written, examined or removed)."""
        return _FileLock(self.directory / f"{self.kind}.lock")


class _FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> _FileLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _append_bytes(path: Path, record: bytes) -> None:
    """One write(2) with O_APPEND: concurrent readers see the record whole or not yet (the crc tells)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, record)
        while written < len(record):  # a short write (a full disk): the rest, or an error; the CRC guards
            written += os.write(fd, record[written:])
    finally:
        os.close(fd)


def _matching(directory: Path, pattern: re.Pattern, kind: str) -> list[tuple[Path, int]]:
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = pattern.match(path.name)
        if match and match["kind"] == kind:
            found.append((path, int(match["gen"])))
    return found


def index_files(directory: Path, kind: str) -> list[tuple[Path, int]]:
    """The snapshots of ``kind`` on disk with their generations."""
    return sorted(_matching(directory, _SNAPSHOT, kind), key=lambda pair: pair[1])


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(directory: Path) -> None:
    """Make a rename itself durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
