"""FAISS vector indices that are only ever a cache of the embeddings kept in SQLite.

Each index is an exact inner-product index over unit vectors (so scores are cosines) keyed by the SQLite row
id. It is written whole to a temporary file and renamed into place, so a reader sees the old file or the new
one, never half of one. The file name carries the *generation* of the table it mirrors (a counter SQLite
bumps in the same transaction as every vector change): an index whose generation does not match the
database is stale and is rebuilt from SQLite instead of being trusted.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import faiss
import numpy as np

_FILE = re.compile(r"^(?P<kind>[a-z_]+)\.(?P<gen>\d+)\.faiss$")


class VectorIndex:
    """An in-memory FAISS index of ``dim``-dimensional unit vectors with 64-bit ids."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    @classmethod
    def build(cls, dim: int, ids: np.ndarray, vectors: np.ndarray) -> VectorIndex:
        index = cls(dim)
        index.add(ids, vectors)
        return index

    def ids(self) -> np.ndarray:
        """Every id held, in insertion order."""
        return faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def add(self, ids: np.ndarray | list[int], vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        if len(ids):
            self._index.add_with_ids(vectors, ids)

    def remove(self, ids: np.ndarray | list[int]) -> int:
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return 0
        return int(self._index.remove_ids(ids))

    def vector(self, item_id: int) -> np.ndarray:
        return self._index.reconstruct(int(item_id))

    def search(
        self, query: np.ndarray, k: int, allowed_ids: np.ndarray | list[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest ids with their cosine scores, best first; optionally only among ``allowed_ids``."""
        if len(self) == 0 or k <= 0:
            return []
        query = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        params = None
        if allowed_ids is not None:
            allowed = np.asarray(allowed_ids, dtype=np.int64)
            if not len(allowed):
                return []
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed))
        scores, ids = self._index.search(query, min(k, len(self)), params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def save(self, directory: Path, kind: str, generation: int) -> Path:
        """Write atomically as ``<kind>.<generation>.faiss`` and delete older generations of ``kind``.

        Newer generations (written meanwhile by another process) are left alone.
        """
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{kind}.{generation}.faiss"
        fd, tmp = tempfile.mkstemp(prefix=f".{kind}.", suffix=".tmp", dir=directory)
        os.close(fd)
        try:
            faiss.write_index(self._index, tmp)
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _fsync_dir(directory)
        for path, gen in index_files(directory, kind):
            if gen < generation:
                path.unlink(missing_ok=True)
        return final

    @classmethod
    def load(cls, path: Path) -> VectorIndex:
        raw = faiss.read_index(str(path))
        index = cls.__new__(cls)
        index.dim = raw.d
        index._index = faiss.downcast_index(raw) if not isinstance(raw, faiss.IndexIDMap2) else raw
        if not isinstance(index._index, faiss.IndexIDMap2):
            raise ValueError(f"{path} is not an id-mapped index")
        return index


def index_files(directory: Path, kind: str) -> list[tuple[Path, int]]:
    """The saved files of ``kind`` with their generations."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _FILE.match(path.name)
        if match and match["kind"] == kind:
            found.append((path, int(match["gen"])))
    return found


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable."""
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
